"""`skillbank demo`: the main job on the embedded default (tiny offline model, synthetic video QA)."""
