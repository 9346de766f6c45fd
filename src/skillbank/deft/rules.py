"""The loop's two decisions, as pure functions: adopt a round (regression guard) and stop (stop rule)."""

from __future__ import annotations

from dataclasses import dataclass


def adopt(candidate: float, best: float, min_gain: float = 0.0) -> bool:
    """A round is adopted only when its benchmark metric beats the best so far by more than min_gain.
    A tie or a regression keeps the best model so far as the loop's output."""
    return candidate > best + min_gain + 1e-12


@dataclass(frozen=True)
class StopDecision:
    stop: bool
    reason: str  # "" while going on; target | max_rounds | patience | no_gaps | pool_exhausted


def should_stop(*, best: float, rounds_done: int, adopted: list[bool], target: float | None, max_rounds: int,
                patience: int, gaps: int | None = None, pool_left: int | None = None) -> StopDecision:
    """Whether the loop stops after `rounds_done` rounds (adopted: one flag per round, in order).

    Checked in this order: the target is met by the best benchmark metric; nothing left to fix (no
    proxy gaps) or to add (pool exhausted); max_rounds reached; the last `patience` rounds were all
    not adopted."""
    if target is not None and best >= target:
        return StopDecision(True, "target")
    if gaps == 0:
        return StopDecision(True, "no_gaps")
    if pool_left == 0:
        return StopDecision(True, "pool_exhausted")
    if rounds_done >= max_rounds:
        return StopDecision(True, "max_rounds")
    streak = 0
    for flag in reversed(adopted):
        if flag:
            break
        streak += 1
    if streak >= patience:
        return StopDecision(True, "patience")
    return StopDecision(False, "")
