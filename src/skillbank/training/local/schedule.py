"""The learning-rate schedule of the local backend: cosmos-rl's own, step for step (pure functions;
the step count is skillbank.runs.steps, the same arithmetic as cosmos-rl's).

cosmos-rl (`cosmos_rl.policy.trainer.optm.build_lr_schedulers`, with the defaults our TOML leaves:
optm_warmup_start_factor 0, optm_decay_ratio unset) ramps the rate linearly from 0 at the first
optimizer step to optm_lr at the last warm-up step, so the first step of a run with warm-up moves
nothing (one warm-up step means no ramp). The warm-up is optm_warmup_steps steps, or that fraction
of all steps rounded down when < 1, and never more than all steps. Then the rate decays to
optm_min_lr_factor * optm_lr by `linear`, `sqrt` or `cosine`, reaching the floor after the last
step, or stays (`none`). tests/test_lr_schedule.py compares every step with the installed cosmos-rl.
"""

from __future__ import annotations

import math
from typing import Any, Callable

DECAYS = ("linear", "sqrt", "cosine", "none")


def warmup_steps(warmup: float, total_steps: int) -> int:
    """The spec's optm_warmup_steps as a step count (the TOML writes a value < 1 as cosmos-rl's fraction)."""
    steps = int(warmup * total_steps) if warmup < 1 else int(warmup)
    return min(steps, total_steps)


def lr_factor(step: int, *, total_steps: int, warmup: int, decay: str, min_factor: float) -> float:
    """Multiplier of optm_lr for the optimizer step with 0-based index `step` (LambdaLR's argument)."""
    if step < warmup:
        return 1.0 if warmup == 1 else step / (warmup - 1)
    if decay not in DECAYS:
        raise ValueError(f"unknown optm_decay_type {decay!r}")
    if decay == "none":
        return 1.0
    progress = min(1.0, (step - warmup) / max(1, total_steps - warmup))
    if decay == "linear":
        shape = 1.0 - progress
    elif decay == "sqrt":
        shape = 1.0 - math.sqrt(progress)
    else:
        shape = 0.5 * (1.0 + math.cos(math.pi * progress))
    return min_factor + (1.0 - min_factor) * shape


def lr_lambda(train: Any, total_steps: int) -> Callable[[int], float]:
    """LambdaLR's function for a spec's train section, as the local trainers build it (an rl spec has
    no optm_decay_type: constant after warm-up, as cosmos-rl without one)."""
    warmup = warmup_steps(train.optm_warmup_steps, total_steps)
    decay = getattr(train, "optm_decay_type", "none")
    min_factor = getattr(train, "optm_min_lr_factor", 0.0)
    return lambda step: lr_factor(step, total_steps=total_steps, warmup=warmup, decay=decay, min_factor=min_factor)
