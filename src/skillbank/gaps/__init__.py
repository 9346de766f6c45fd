"""DEFT gap analysis: an evaluation's results.json -> a parquet of the failures (see analyze.py).

Imports nothing heavy: no torch or transformers, so it runs where only the results are.
"""
