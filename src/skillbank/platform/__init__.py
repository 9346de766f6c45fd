"""Where a job runs: this machine (a detached process), a Docker container, or a Slurm allocation.

Every platform renders the same way (a command or script in `<results_dir>/jobs/<id>/`), launches
unless `--dry-run`, and writes one job record shape (`record.py`) that `skillbank jobs status | logs |
cancel` read back. Nothing here imports torch, transformers or cosmos_rl at import time.
"""
