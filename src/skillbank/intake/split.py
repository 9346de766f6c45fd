"""Which split each item goes to: the source's own splits, else a deterministic carve of train.

Items are grouped by clip, so two questions on one clip never straddle train and val (a model would
be validated on clips it trained on). Groups are stratified by the `family` key where items carry one
(the answer family evaluation and gap analysis report per), and ordered by a hash of (seed, clip), so
the split depends on neither the order the source listed things in nor the machine. Val takes
`validation_count` of the groups (cosmos-rl's rounding: int(n x fraction), at least 1, at most n - 1),
shared among the strata by their size (largest remainders).
"""

from __future__ import annotations

import hashlib
from collections import Counter, defaultdict

from skillbank.data.split import validation_count
from skillbank.intake.items import Item, split_name

TRAIN, VAL = "train", "val"


def _rank(seed: int, clip: str) -> str:
    return hashlib.sha256(f"{seed}\0{clip}".encode()).hexdigest()


def carve(items: list[Item], val_fraction: float, seed: int) -> set[str]:
    """The clips (Item.clip) that go to val."""
    groups: dict[str, list[Item]] = defaultdict(list)
    for item in items:
        groups[item.clip].append(item)
    strata: dict[str | None, list[str]] = defaultdict(list)
    for clip, members in groups.items():
        families = Counter(m.family for m in members if m.family is not None)
        strata[families.most_common(1)[0][0] if families else None].append(clip)
    if val_fraction <= 0 or len(groups) < 2:
        return set()
    total = validation_count(len(groups), val_fraction)
    quotas = {k: total * len(v) / len(groups) for k, v in strata.items()}
    shares = {k: int(q) for k, q in quotas.items()}
    by_remainder = sorted(strata, key=lambda k: (-(quotas[k] - shares[k]), str(k)))
    for k in by_remainder[: total - sum(shares.values())]:
        shares[k] += 1  # largest remainders first: the strata keep their proportions, the total is exact
    val: set[str] = set()
    for k, clips in strata.items():
        val.update(sorted(clips, key=lambda c: _rank(seed, c))[: shares[k]])
    return val


def assign(items: list[Item], val_fraction: float, seed: int) -> tuple[dict[str, list[Item]], dict[str, str]]:
    """({split: items}, {split: how it came about}) in the order the items came."""
    named = [split_name(i.split) for i in items]
    has_own = any(n is not None for n in named)
    how: dict[str, str] = {}
    out: dict[str, list[Item]] = defaultdict(list)
    if has_own:
        for item, name in zip(items, named):
            out[name or TRAIN].append(item)
        how = {name: "source" for name in out}
    else:
        out[TRAIN] = list(items)
    if TRAIN in out and VAL not in out and val_fraction > 0:
        to_val = carve(out[TRAIN], val_fraction, seed)
        if to_val:
            out[VAL] = [i for i in out[TRAIN] if i.clip in to_val]
            out[TRAIN] = [i for i in out[TRAIN] if i.clip not in to_val]
            how[TRAIN] = how.get(TRAIN, "source") if has_own else "carved"
            how[VAL] = f"carved from train (val fraction {val_fraction}, seed {seed}, grouped by clip)"
    how.setdefault(TRAIN, "carved" if VAL in out else "all records")
    return dict(out), {k: how.get(k, "source") for k in out}
