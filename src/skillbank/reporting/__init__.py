"""`skillbank report`: one page of evidence about a training run and its evaluations, with pictures.

It reads what the run and `skillbank evaluate` already wrote (metrics.jsonl or the cosmos-rl logs, the
recipe, metrics.json, results.json, the clips) and recomputes none of it: per-family accuracy and
intervals come from metrics.json, verdicts from results.json. `inputs` reads and checks them, `figures`
draws (matplotlib, Agg), `frames` cuts a strip of frames from a clip (PyAV), `sections` turns them into
the report's parts, `document` writes report.html (pictures embedded) and report.md (PNGs beside it).
"""
