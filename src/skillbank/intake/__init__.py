"""Data in from the user's world: other layouts and formats -> LLaVA records a spec can take.

`skillbank data import | fix | stats`. Each reader is an adapter into one record shape; probing
clips lives in `skillbank.data.probe`.
"""
