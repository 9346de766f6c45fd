"""The learning-rate schedule of the local backend (pure functions; its step count is
skillbank.runs.steps, the same arithmetic as cosmos-rl's).

Warm-up is linear from 0 to optm_lr over optm_warmup_steps (a fraction of all steps when < 1);
then the rate decays to optm_min_lr_factor * optm_lr by `linear`, `sqrt`, `cosine`, or stays (`none`).
"""

from __future__ import annotations

import math


def warmup_steps(warmup: float, total_steps: int) -> int:
    return int(round(warmup * total_steps)) if warmup < 1 else int(warmup)


def lr_factor(step: int, *, total_steps: int, warmup: int, decay: str, min_factor: float) -> float:
    """Multiplier of optm_lr for the optimizer step with 0-based index `step`."""
    if warmup > 0 and step < warmup:
        return (step + 1) / warmup
    if decay == "none":
        return 1.0
    span = max(1, total_steps - warmup)
    progress = min(1.0, max(0.0, (step - warmup) / span))
    if decay == "linear":
        shape = 1.0 - progress
    elif decay == "sqrt":
        shape = 1.0 - math.sqrt(progress)
    elif decay == "cosine":
        shape = 0.5 * (1.0 + math.cos(math.pi * progress))
    else:
        raise ValueError(f"unknown optm_decay_type {decay!r}")
    return min_factor + (1.0 - min_factor) * shape
