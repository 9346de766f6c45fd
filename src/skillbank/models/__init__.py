"""Models: the model table (entries/, table.py: one declarative entry per model the bank knows), the parameter counter (params.py) and `skillbank models add`'s writer (add.py)."""
