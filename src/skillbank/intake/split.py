"""Which split each item goes to: the source's own splits, else a deterministic carve of train.

Items are grouped by clip, so two questions on one clip never straddle train and val (a model would
be validated on clips it trained on). Groups are stratified by the `family` key where items carry one
(the answer family evaluation and gap analysis report per), and ordered by a hash of (seed, clip), so
the split depends on neither the order the source listed things in nor the machine. Val takes
`val_clip_count` of the groups: an explicit --val-fraction by cosmos-rl's rounding (`validation_count`:
int(n x fraction), at least 1, at most n - 1), exactly as given; the default 10% the same, raised to
MIN_VAL_CLIPS where the data affords it. Shared among the strata by their size (largest remainders).
`val_size` says what the val split can measure, with a warning when it is too small to measure anything.
"""

from __future__ import annotations

import hashlib
from collections import Counter, defaultdict

from typing import Any

from skillbank.data.split import DEFAULT_TEST_SIZE, validation_count
from skillbank.errors import warning
from skillbank.intake.items import Item, split_name
from skillbank.scoring.stats import MEASURE_HALF_WIDTH, MEASURE_MIN_RECORDS, wilson_half_width

TRAIN, VAL = "train", "val"
DEFAULT_VAL_FRACTION = DEFAULT_TEST_SIZE  # 0.1: cosmos-rl's own default share when it splits train itself
# `spec --dataset-root DIR` feeds DIR/val to validation and to evaluation, so val reports an accuracy: it is held to
# scoring.stats' bar, a 95% interval of at most +-15 points at any accuracy, which takes 39 samples (Wilson, at 50%;
# computed by n_for_half_width). Counted in clips, not records: the carve's unit, and questions on one clip are no
# independent draws (a model that misreads the clip misses them together), so the clips are the sample size that
# cannot overstate. 1 clip gives +-45 points (one answer moves the accuracy 100), 5 clips +-33, 10 clips +-26.
MIN_VAL_CLIPS = MEASURE_MIN_RECORDS
# The default raises val to MIN_VAL_CLIPS only where that takes at most a quarter of the clips (from 156 clips on;
# from 390 on 10% is 39 already): 0.25 is the test share scikit-learn's train_test_split takes by default, the most a
# default should take from training. Below 156 clips the default keeps 10% and warns (`val_size`).
MAX_RAISED_SHARE = 0.25


def _rank(seed: int, clip: str) -> str:
    return hashlib.sha256(f"{seed}\0{clip}".encode()).hexdigest()


def val_clip_count(clips: int, val_fraction: float | None) -> int:
    """Clips val takes out of `clips`: an explicit fraction by cosmos-rl's rounding, as given (0: none); the default
    (None) DEFAULT_VAL_FRACTION, raised to MIN_VAL_CLIPS where that is at most MAX_RAISED_SHARE of the clips."""
    if clips < 2 or (val_fraction is not None and val_fraction <= 0):
        return 0
    if val_fraction is not None:
        return validation_count(clips, val_fraction)
    count = validation_count(clips, DEFAULT_VAL_FRACTION)
    return MIN_VAL_CLIPS if count < MIN_VAL_CLIPS <= clips * MAX_RAISED_SHARE else count


def carve(items: list[Item], val_fraction: float | None, seed: int) -> set[str]:
    """The clips (Item.clip) that go to val (val_fraction None: the default rule, `val_clip_count`)."""
    groups: dict[str, list[Item]] = defaultdict(list)
    for item in items:
        groups[item.clip].append(item)
    strata: dict[str | None, list[str]] = defaultdict(list)
    for clip, members in groups.items():
        families = Counter(m.family for m in members if m.family is not None)
        strata[families.most_common(1)[0][0] if families else None].append(clip)
    total = val_clip_count(len(groups), val_fraction)
    if not total:
        return set()
    quotas = {k: total * len(v) / len(groups) for k, v in strata.items()}
    shares = {k: int(q) for k, q in quotas.items()}
    by_remainder = sorted(strata, key=lambda k: (-(quotas[k] - shares[k]), str(k)))
    for k in by_remainder[: total - sum(shares.values())]:
        shares[k] += 1  # largest remainders first: the strata keep their proportions, the total is exact
    val: set[str] = set()
    for k, clips in strata.items():
        val.update(sorted(clips, key=lambda c: _rank(seed, c))[: shares[k]])
    return val


def assign(items: list[Item], val_fraction: float | None, seed: int) -> tuple[dict[str, list[Item]], dict[str, str]]:
    """({split: items}, {split: how it came about}) in the order the items came (val_fraction None: the default)."""
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
    if TRAIN in out and VAL not in out and (val_fraction is None or val_fraction > 0):
        to_val = carve(out[TRAIN], val_fraction, seed)
        if to_val:
            clips = len({i.clip for i in out[TRAIN]})
            out[VAL] = [i for i in out[TRAIN] if i.clip in to_val]
            out[TRAIN] = [i for i in out[TRAIN] if i.clip not in to_val]
            how[TRAIN] = how.get(TRAIN, "source") if has_own else "carved"
            how[VAL] = f"carved from train ({_rule(val_fraction, clips)}, seed {seed}, grouped by clip)"
    how.setdefault(TRAIN, "carved" if VAL in out else "all records")
    return dict(out), {k: how.get(k, "source") for k in out}


def _rule(val_fraction: float | None, clips: int) -> str:
    """The carve's rule in words: the fraction given, or the default and whether it was raised."""
    if val_fraction is not None:
        return f"--val-fraction {val_fraction:g} as given"
    if val_clip_count(clips, None) > validation_count(clips, DEFAULT_VAL_FRACTION):
        return (f"default val fraction {DEFAULT_VAL_FRACTION:g}, raised to {MIN_VAL_CLIPS} of {clips} clips: "
                f"the fewest that measure an accuracy to +-{MEASURE_HALF_WIDTH * 100:.0f} points")
    return f"default val fraction {DEFAULT_VAL_FRACTION:g}"


def val_size(splits: dict[str, list[Item]], how: dict[str, str], val_fraction: float | None) -> dict[str, Any]:
    """What the val split can measure: its clips and records, the widest 95% interval on an accuracy over its clips,
    whether it reaches MIN_VAL_CLIPS, and a warning (None when it does, when there is no train to validate, or when
    --val-fraction 0 asked for no val and the source has none)."""
    val = splits.get(VAL, [])
    clips, records = len({i.clip for i in val}), len(val)
    pool = len({i.clip for name in (TRAIN, VAL) for i in splits.get(name, [])})
    size: dict[str, Any] = {
        "clips": clips, "records": records, "of_clips": pool, "min_clips": MIN_VAL_CLIPS,
        "ci95_half_width": round(wilson_half_width(0.5, clips), 4) if clips else None, "enough": clips >= MIN_VAL_CLIPS,
        "warning": None,
    }
    asked_none = val_fraction is not None and val_fraction <= 0 and not val
    if TRAIN in splits and not asked_none and not size["enough"]:
        size["warning"] = _warning(size, how.get(VAL, ""), val_fraction)
    return size


def _warning(size: dict[str, Any], how: str, val_fraction: float | None) -> str:
    """What is wrong with a small val split, then each fix on its own (errors.warning: `WHAT; fix: A; fix: B`)."""
    clips, records, pool, least = size["clips"], size["records"], size["of_clips"], MIN_VAL_CLIPS
    held_out = (f"import {least}+ held-out labelled clips alone (skillbank data import HELDOUT --out DIR_VAL --val-fraction 0); train with "
                f"--set custom.val_dataset.annotation_path=DIR_VAL/train/annotations.json --set custom.val_dataset.media_path=DIR_VAL/train "
                f"and evaluate with --dataset-root DIR_VAL/train")
    if not clips:
        return warning(f"no val split: {pool} clip(s) cannot be split, and `skillbank spec --dataset-root` would validate and evaluate "
                       "on the training records", held_out)
    what = f"{clips} clip(s) ({records} record(s))"
    if how == "source":
        said, fixes = f"the source's val split has {what}", (held_out, f"or give the source a val split of {least}+ clips")
    else:
        rule = (f"--val-fraction {val_fraction:g} (kept as given)" if val_fraction is not None else
                f"the default --val-fraction {DEFAULT_VAL_FRACTION:g} ({least} clips would take more than a quarter of the data)")
        said = f"val has {what} of {pool} clips, carved by {rule}"
        fixes = (held_out, f"or pass --val-fraction 0 to train on all {pool} clips, and evaluate on such a held-out set")
    return warning(f"{said}: too noisy to report its validation loss and accuracy (one answer moves the accuracy {100 / clips:.0f} "
                   f"points; a 95% interval on it is up to +-{size['ci95_half_width'] * 100:.0f} points, {least} clips give "
                   f"+-{MEASURE_HALF_WIDTH * 100:.0f})", *fixes)
