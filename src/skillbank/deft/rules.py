"""The loop's two decisions, as pure functions: adopt a round (regression guard) and stop (stop rule)."""

from __future__ import annotations

from dataclasses import dataclass


def adopt(candidate: float, best: float, min_gain: float = 0.0) -> bool:
    """A round is adopted only when its benchmark metric beats the best so far by more than min_gain.
    A tie or a regression keeps the best model so far as the loop's output."""
    return candidate > best + min_gain + 1e-12


@dataclass(frozen=True)
class Adoption:
    adopted: bool
    reason: str  # why not, in words ("" when adopted)
    fallen: dict[str, float]  # other families that fell beyond the guard: family -> drop


def adopt_on_family(candidate: dict[str, float], best: dict[str, float], family: str, *, min_gain: float = 0.0,
                    max_drop: float = 0.0) -> Adoption:
    """stop.adopt_on: adopt when `family`'s benchmark accuracy beats the best model's by more than min_gain and
    no other family (measured for both) falls more than max_drop below the best model's accuracy."""
    gained = adopt(candidate.get(family, 0.0), best.get(family, 0.0), min_gain)
    fallen = {f: round(best[f] - candidate[f], 6) for f in sorted(best) if f != family and f in candidate
              and best[f] - candidate[f] > max_drop + 1e-12}
    reasons = []
    if not gained:
        reasons.append(f"{family} {candidate.get(family, 0.0):.4f} <= best {best.get(family, 0.0):.4f} + {min_gain}")
    if fallen:
        reasons.append("fell beyond the guard (" + ", ".join(f"{f} -{d:.4f}" for f, d in fallen.items()) + f" > {max_drop})")
    return Adoption(gained and not fallen, "; ".join(reasons), fallen)


PROXY_TRAINING_SHARE = 0.5  # a proxy with at least this share of training items cannot show the model's errors


@dataclass(frozen=True)
class StopDecision:
    stop: bool
    reason: str  # "" while going on; target | max_rounds | patience | no_gaps | proxy_is_training_data | pool_exhausted


def should_stop(*, best: float, rounds_done: int, adopted: list[bool], target: float | None, max_rounds: int,
                patience: int, gaps: int | None = None, pool_left: int | None = None,
                proxy_training_share: float = 0.0) -> StopDecision:
    """Whether the loop stops after `rounds_done` rounds (adopted: one flag per round, in order).

    Checked in this order: the target is met by the best benchmark metric; nothing left to fix (no
    proxy gaps: `proxy_is_training_data` instead of `no_gaps` when at least PROXY_TRAINING_SHARE of the
    proxy records are training items, since such a proxy finds no errors because the model was trained
    on it) or to add (pool exhausted); max_rounds reached; the last `patience` rounds were all not adopted."""
    if target is not None and best >= target:
        return StopDecision(True, "target")
    if gaps == 0:
        return StopDecision(True, "proxy_is_training_data" if proxy_training_share >= PROXY_TRAINING_SHARE else "no_gaps")
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
