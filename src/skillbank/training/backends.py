"""The training backends, and the one default that train, automl and submit share."""

from __future__ import annotations

BACKENDS = ("cosmos-rl", "local")
DEFAULT_BACKEND = "cosmos-rl"  # the production engine (GPUs, one node to many); `--backend local` trains on this machine
BACKEND_HELP = (f"training backend: cosmos-rl (production: GPUs, one node to many) or local (torchrun + FSDP2 on this "
                f"machine, CPU or GPUs) (default: {DEFAULT_BACKEND})")
