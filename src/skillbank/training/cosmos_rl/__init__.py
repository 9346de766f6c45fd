"""The cosmos-rl backend: spec -> TOML, the dataset script cosmos-rl runs, the launch, the log watcher.

Nothing here imports cosmos_rl, torch or transformers at import time; `script.py` does, inside its
`main()`, because it runs inside cosmos-rl's own processes.
"""
