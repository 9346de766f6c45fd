"""Step arithmetic and the learning-rate schedule of the local backend (pure functions).

Warm-up is linear from 0 to optm_lr over optm_warmup_steps (a fraction of all steps when < 1);
then the rate decays to optm_min_lr_factor * optm_lr by `linear`, `sqrt`, `cosine`, or stays (`none`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class StepPlan:
    records: int
    world: int
    batch_per_rank: int
    epochs: int
    max_num_steps: int | None

    @property
    def global_batch(self) -> int:
        return self.world * self.batch_per_rank

    @property
    def steps_per_epoch(self) -> int:
        """Full global batches per epoch (a partial last batch is dropped so all ranks step together)."""
        return self.records // self.global_batch

    @property
    def total_steps(self) -> int:
        total = self.steps_per_epoch * self.epochs
        return min(total, self.max_num_steps) if self.max_num_steps else total

    def epoch_of(self, step: int) -> int:
        """Epoch (0-based) of the step after `step` completed steps."""
        return step // self.steps_per_epoch if self.steps_per_epoch else 0


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
