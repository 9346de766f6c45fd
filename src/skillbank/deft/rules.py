"""The loop's two decisions, as pure functions: adopt a round (regression guard) and stop (stop rule)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from skillbank.errors import warning
from skillbank.scoring.stats import MEASURE_HALF_WIDTH, MEASURE_MIN_RECORDS, wilson_half_width


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

# A warning, not a refusal. The proxy finds the gaps and picks each round's checkpoint by its accuracy, so it must
# measure an accuracy to some precision: scoring.stats' coarse bar (MEASURE_MIN_RECORDS, 39 records: +-15 points at any accuracy).


def proxy_size(records: int) -> dict[str, Any]:
    """What a proxy of `records` records can measure: the widest 95% Wilson half width of its accuracy (at 50%),
    what one answer moves it by, and whether it reaches MEASURE_MIN_RECORDS (`deft init` and the dry run report it)."""
    return {"records": records, "min_records": MEASURE_MIN_RECORDS, "ci95_half_width": round(wilson_half_width(0.5, records), 4),
            "one_answer": round(1 / records, 4) if records else None, "enough": records >= MEASURE_MIN_RECORDS}


def proxy_size_line(size: dict[str, Any]) -> str:
    """The proxy's size in words (a text line beside the training overlap)."""
    return (f"proxy size: {size['records']:,} records: a 95% interval on its accuracy is up to +-{_points(size['ci95_half_width'])} "
            f"(at 50%; {size['min_records']} records or more give +-{_points(MEASURE_HALF_WIDTH)})")


def _points(share: float) -> str:
    return f"{share * 100:.0f} points"


def proxy_size_warning(size: dict[str, Any], fix: str) -> str | None:
    """The warning for a proxy too small to measure a gap (None when it has MEASURE_MIN_RECORDS records, or none:
    an empty proxy is preflight's error); `fix` says how to get a larger one where the caller knows."""
    n = size["records"]
    if size["enough"] or not n:
        return None
    return warning(f"the proxy set has only {n} record(s): one answer moves its accuracy {_points(size['one_answer'])} and a 95% interval "
                   f"on it is up to +-{_points(size['ci95_half_width'])}, too wide to measure a gap or pick a checkpoint ({MEASURE_MIN_RECORDS} "
                   f"records or more give +-{_points(MEASURE_HALF_WIDTH)})", fix)


def pool_budget(records: int, records_per_round: int, max_rounds: int) -> dict[str, Any]:
    """Whether the pool feeds every round the config allows: mining takes up to records_per_round unused pool records a
    round, for up to max_rounds rounds; rounds_fed: the rounds that get records before it runs dry (`deft init` and the dry
    run report it; an empty pool is preflight's error)."""
    need = records_per_round * max_rounds
    return {"records": records, "records_per_round": records_per_round, "max_rounds": max_rounds, "need": need,
            "rounds_fed": -(-records // records_per_round), "enough": records >= need}


def pool_budget_line(budget: dict[str, Any]) -> str:
    """The pool's budget in words (a text line beside the proxy size)."""
    return (f"pool budget: {budget['records']:,} records for up to {budget['max_rounds']} round(s) of {budget['records_per_round']:,} "
            f"(mining.records_per_round x stop.max_rounds = {budget['need']:,})" + ("" if budget["enough"] else ": runs dry"))


def pool_budget_warning(budget: dict[str, Any], fix: str) -> str | None:
    """The warning for a pool smaller than mining.records_per_round x stop.max_rounds (None when it is not, or empty)."""
    n = budget["records"]
    if budget["enough"] or not n:
        return None
    return warning(f"pool: {n} records < mining.records_per_round x stop.max_rounds ({budget['need']}); the loop stops when it runs dry "
                   f"(pool_exhausted after round {budget['rounds_fed']} of {budget['max_rounds']})", fix)


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
