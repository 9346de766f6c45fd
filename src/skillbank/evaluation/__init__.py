"""Evaluation: a model on a LLaVA video-QA set -> results.json + metrics.json (evaluate.py), every
checkpoint of a run -> best_checkpoint.json, inference (inference.py), and the metrics (metrics.py,
pure Python). torch and transformers load only inside the functions that generate.
"""
