"""Batches fitted to the data, once: `skillbank spec` (train and rl), each AutoML trial and each DEFT
round lower the batches they did not set with these functions, so every derived spec trains alike.

The rule (`fit_batch`): a batch the user did not set is a ceiling; when it gives fewer than
FEW_STEPS_PER_EPOCH optimizer steps per epoch (the threshold of the "barely trains" warning) it
comes down to the largest multiple of mini_batch that gives that many, where the data allows; only
when no batch reaches it, the largest batch that trains, and the warning stays. Values the user set
are never changed. The arithmetic is runs.steps' (cosmos-rl's sampler and data loader). Light: no torch.
"""

from __future__ import annotations

import math
from collections.abc import Collection
from dataclasses import dataclass, replace
from typing import Any

from skillbank.runs.steps import (BATCH_KEY, FEW_STEPS_PER_EPOCH, VALIDATION_BATCH_KEY, TrainCount, count_data, step_plan,
                                  validation_batches)

MINI_BATCH_KEY = "train.train_policy.mini_batch"


@dataclass(frozen=True)
class BatchFit:
    """One batch value lowered to fit the data (the spec's value was the ceiling). `given`: the value the
    `spec --from` file held (None: no such file, or it did not name the key); fitted again from the ceiling to
    the same value, the file's value is kept, and the output says "kept", never "ceiling -> value"."""

    key: str
    before: int
    after: int
    why: str
    given: int | None = None

    @property
    def kept(self) -> bool:
        return self.given == self.after

    def line(self) -> str:
        if self.given is None or self.given == self.before:
            return f"{self.key} {self.before} -> {self.after}: {self.why}"
        again = f" (fitted again from the ceiling {self.before})" if self.after != self.before else ""
        return f"{self.key} {self.given} -> {self.after}{again}: {self.why}"

    def said(self) -> str:
        """How `skillbank spec` prints it: "kept: KEY V (fitted earlier; ceiling C)" when the file's value stands,
        else "fitted: KEY A -> B: why" (A: the file's value, or the ceiling where the file had none)."""
        if self.kept:
            return f"kept: {self.key} {self.after} (fitted earlier; ceiling {self.before})"
        return f"fitted: {self.line()}"

    def to_dict(self) -> dict[str, Any]:
        """{key, from (the ceiling the fit started from), to, why, given (the --from file's value or null), kept (given == to)}."""
        return {"key": self.key, "from": self.before, "to": self.after, "why": self.why, "given": self.given, "kept": self.kept}


def against_given(fits: list[BatchFit], given: dict[str, Any] | None) -> list[BatchFit]:
    """Each fit with the value the `spec --from` file (`given`, as read) held for its key: what its output compares with."""
    if not given:
        return fits
    from skillbank.specification.overrides import get_dotted

    return [replace(f, given=get_dotted(given, f.key)) for f in fits]


def back_to_ceiling(ceilings: dict[str, int], given: dict[str, Any] | None, spec: Any, fits: list[BatchFit],
                    applied: Collection[str] = ()) -> list[BatchFit]:
    """Keys the `spec --from` file held fitted (its `fitted` block's `ceilings`) that need no fitting now: written back at
    their ceiling, a value that moved, so the output names it like any fit (not set again by the user: `applied`)."""
    from skillbank.specification.overrides import get_dotted

    done, data = {f.key for f in fits}, spec.model_dump(mode="json")
    return [BatchFit(key, ceiling, get_dotted(data, key), "back to its ceiling (the template's value): the records counted now need no lower value", get_dotted(given or {}, key))
            for key, ceiling in ceilings.items()
            if key not in done and key not in applied and get_dotted(given or {}, key) not in (None, get_dotted(data, key))]


def fit_batch(per_rank: int, batch: int, mini: int, *, mini_fixed: bool = False,
              target: int = FEW_STEPS_PER_EPOCH) -> tuple[int, int, bool] | None:
    """The one fitting rule: (batch, mini_batch, reached) for a rank holding `per_rank` records whose
    spec batch `batch` (the ceiling) gives fewer than `target` optimizer steps per epoch; None when it
    gives enough (or nothing can train). The largest multiple of mini_batch giving at least `target`
    steps (reached True); when even mini_batch gives fewer, mini_batch comes down to the batch that
    gives `target` (unless `mini_fixed`). Only when no batch reaches `target`: a batch that already
    trains is kept, a batch giving zero steps becomes the largest that trains (reached False; the
    "barely trains" warning follows), mini_batch coming down only when a rank holds less than one."""
    if per_rank < 1 or per_rank // batch >= target:
        return None
    want = per_rank // target  # the largest batch giving `target` steps, ignoring mini_batch
    if want >= mini:
        return want // mini * mini, mini, True
    if want >= 1 and not mini_fixed:
        return want, want, True
    if per_rank // batch >= 1:
        return None
    if per_rank >= mini:
        return per_rank // mini * mini, mini, False
    return (per_rank, per_rank, False) if not mini_fixed else None


def fit_train_batches(spec: Any, count: "TrainCount", val_records: int | None = None, *, fixed: Collection[str] = ()) -> list[BatchFit]:
    """The batch values of a train spec that must come down for the run to train usefully, largest
    first: the spec's values are the ceiling; train_batch_per_replica follows `fit_batch` (at least
    FEW_STEPS_PER_EPOCH optimizer steps per epoch where the data allows, else the largest batch that
    trains), validation.batch_size becomes the largest that gives one validation batch per rank. Keys
    in `fixed` (the ones the user set) are never changed: plan_errors then names the fix. Nothing to
    fit: []."""
    fits: list[BatchFit] = []
    plan = step_plan(spec, count.train)
    per_rank, batch, mini = plan.records_per_rank, plan.batch_per_rank, plan.mini_batch
    share = f"{count.train:,} train records over {plan.ranks} data-parallel rank(s) give {per_rank:,} per rank"
    fitted = None if BATCH_KEY in fixed else fit_batch(per_rank, batch, mini, mini_fixed=MINI_BATCH_KEY in fixed)
    if fitted:
        new_batch, new_mini, reached = fitted
        after = plan.with_batch(new_batch, new_mini)
        result = f"{after.steps_per_epoch:,} optimizer step(s) per epoch, {after.total_steps:,} in all"
        if reached:
            why = (f"{share}; {batch} would give {plan.steps_per_epoch} step(s) per epoch; the largest multiple of mini_batch {new_mini} giving at least "
                   f"{FEW_STEPS_PER_EPOCH} optimizer steps per epoch (fewer barely trains): {result}")
        else:
            why = (f"{share}; no batch gives {FEW_STEPS_PER_EPOCH} optimizer steps per epoch, so the largest multiple of mini_batch "
                   f"{new_mini} that gives one: {result} (the run barely trains: add records or use fewer ranks)")
        fits.append(BatchFit(BATCH_KEY, batch, new_batch, why))
        if new_mini != mini:
            short = "fewer than one mini batch" if not reached else f"mini_batch {mini} gives fewer than {FEW_STEPS_PER_EPOCH} steps per epoch"
            fits.append(BatchFit(MINI_BATCH_KEY, mini, new_mini, f"{share}, {short}: mini_batch must divide the batch"))
    val = count.split or val_records
    if spec.validation.enable and val and VALIDATION_BATCH_KEY not in fixed:
        size = spec.validation.batch_size
        val_per_rank, batches = validation_batches(val, plan.ranks, size)
        if batches == 0:
            fits.append(BatchFit(VALIDATION_BATCH_KEY, size, val_per_rank,
                                 f"{val:,} validation records over {plan.ranks} rank(s) give {val_per_rank:,} per rank: one validation batch each"))
    return fits


def apply_fits(spec: Any, fits: list[BatchFit]) -> Any:
    """The spec with the fitted values, validated again by its model (every rule still holds)."""
    if not fits:
        return spec
    from skillbank.specification.overrides import set_dotted

    data = spec.model_dump(mode="json")
    for fit in fits:
        set_dotted(data, fit.key, fit.after)
    return type(spec).model_validate(data)


def fit_to_data(spec: Any, *, fixed: Collection[str] = ()) -> tuple[Any, list[BatchFit]]:
    """A derived train spec (a DEFT round's, an AutoML trial's) fitted to its own data: the batches it
    inherits are ceilings. Returns the spec (unchanged when nothing needs fitting) and the fits."""
    count, val_records = count_data(spec)
    fits = fit_train_batches(spec, count, val_records, fixed=fixed)
    return apply_fits(spec, fits), fits


def fit_rl_batch(spec: Any, prompts: int, *, fixed: Collection[str] = ()) -> list[BatchFit]:
    """The rl spec's train_batch_per_replica (samples per policy step), fitted to its prompts by the
    train rule: a multiple of n_generation (whole prompts per step, the local backend's rule) and of
    dp_shard_size x mini_batch (cosmos-rl's assertion), the largest up to the spec's giving at least
    FEW_STEPS_PER_EPOCH policy steps per epoch (prompts x n_generation samples); when none does, a
    batch that already trains is kept and one that trains nothing becomes the largest up to one
    epoch's samples. mini_batch comes down to 1 only when no batch fits with it. Keys in `fixed` are
    never changed."""
    batch, g = spec.train.train_batch_per_replica, spec.rollout.n_generation
    mini, ranks = spec.train.train_policy.mini_batch, spec.policy.parallelism.dp_shard_size
    samples, whole = prompts * g, not batch % g
    if BATCH_KEY in fixed or samples == 0 or (whole and samples // batch >= FEW_STEPS_PER_EPOCH):
        return []
    minis = (mini, 1) if MINI_BATCH_KEY not in fixed else (mini,)
    for top, reached in ((min(batch, samples // FEW_STEPS_PER_EPOCH), True), (min(batch, samples), False)):
        if not reached and whole and samples >= batch:
            return []  # no batch reaches the target and this one trains: kept
        for m in minis:
            unit = math.lcm(ranks * m, g)
            new = top // unit * unit
            if not new:
                continue
            rule = (f"at least {FEW_STEPS_PER_EPOCH} policy steps per epoch (fewer barely trains)" if reached
                    else f"one policy step (no batch gives {FEW_STEPS_PER_EPOCH} per epoch: the run barely trains)")
            why = (f"{prompts:,} prompts x rollout.n_generation {g} = {samples:,} samples per epoch; the largest multiple of "
                   f"n_generation and of dp_shard_size {ranks} x mini_batch {m} = {unit} up to {batch} giving {rule}: "
                   f"{samples // new:,} policy step(s) per epoch")
            fits = [BatchFit(BATCH_KEY, batch, new, why)]
            if m != mini:
                fits.append(BatchFit(MINI_BATCH_KEY, mini, m, f"no batch of {top:,} samples or fewer is a multiple of {math.lcm(ranks * mini, g)}"))
            return fits
    return []


def fitted_block(fits: list[BatchFit], records: int, counted: str, previous: dict[str, int] | None = None) -> dict[str, Any]:
    """The spec's `fitted` block for fits made against `records` counted at `counted`: each fitted key's ceiling
    (a key fitted before keeps its first ceiling: re-fitting always starts from the template's value)."""
    ceilings = dict(previous or {})
    for fit in fits:
        ceilings.setdefault(fit.key, fit.before)
    return {"records": records if ceilings else None, "counted": counted if ceilings else "", "ceilings": ceilings}


def refit(spec: Any, count: TrainCount, val_records: int | None, *, counted: str, where: str = "node") -> tuple[Any, list[dict[str, Any]]]:
    """A spec written with a `fitted` block (values fitted to the records `skillbank spec` counted, often a sample)
    fitted again to `count`, the records where it runs: every fitted key back to its ceiling, then the one rule
    (`fit_train_batches`) with every key the user set fixed. Returns the spec (its block now names these records) and
    each change as {key, from, to, why, where, records}, the step count and validation cadence that follow included;
    no block, or the same count: (spec, [])."""
    block = getattr(spec, "fitted", None)
    if block is None or not block.ceilings or block.records == count.train:
        return spec, []
    from skillbank.specification.overrides import set_dotted

    data = spec.model_dump(mode="json")
    for key, ceiling in block.ceilings.items():
        set_dotted(data, key, ceiling)
    data["fitted"] = fitted_block([], count.train, counted, block.ceilings)
    ceiled = type(spec).model_validate(data)
    fixed = {BATCH_KEY, MINI_BATCH_KEY, VALIDATION_BATCH_KEY} - set(block.ceilings)
    fits = fit_train_batches(ceiled, count, val_records, fixed=fixed)
    new = apply_fits(ceiled, fits)
    from skillbank.specification.overrides import get_dotted

    why = {f.key: f.why for f in fits}
    old, now = spec.model_dump(mode="json"), new.model_dump(mode="json")
    changes = [{"key": key, "from": get_dotted(old, key), "to": get_dotted(now, key), "where": where, "records": count.train,
                "why": why.get(key, f"{count.train:,} train records here (the spec was fitted to {block.records:,} at {block.counted}): the ceiling "
                                   f"{block.ceilings[key]} trains usefully")}
               for key in block.ceilings if get_dotted(old, key) != get_dotted(now, key)]
    before, after = step_plan(spec, block.records or 0), step_plan(new, count.train)
    for key, a, b, said in (("steps.total", before.total_steps, after.total_steps, "optimizer steps in all"),
                            ("steps.per_epoch", before.steps_per_epoch, after.steps_per_epoch, "optimizer steps per epoch"),
                            ("validation.every_steps", max(1, spec.validation.freq_in_epoch * before.steps_per_epoch),
                             max(1, new.validation.freq_in_epoch * after.steps_per_epoch), "steps between validations (validation.freq_in_epoch epochs)")):
        if a != b:
            changes.append({"key": key, "from": a, "to": b, "where": where, "records": count.train,
                            "why": f"{said}: {block.records:,} counted records gave {a}, the {count.train:,} here give {b}"})
    return new, changes


@dataclass(frozen=True)
class BatchChange:
    """A derived train spec (`skillbank spec --from`, a DEFT job's allocation) whose global batch or optimizer steps
    per epoch differ from the spec it came from: the global batch is train_batch_per_replica x data-parallel ranks,
    so fewer GPUs halve it silently. Both plans come from runs.steps.step_plan (one arithmetic); `records`: the count
    the steps are at; `what`: what changed the spec, the line's opening words."""

    before: Any  # StepPlan of the spec it came from
    after: Any  # StepPlan of the spec derived
    records: int | None
    what: str = "changed from the --from spec"

    def keep(self) -> str:
        """The setting that gives the old global batch on the new ranks (gradient accumulation absorbs it: mini_batch,
        and so the memory of one forward/backward, stays), or why no per-rank batch does."""
        old, ranks, mini = self.before.global_batch, self.after.ranks, self.after.mini_batch
        if old % ranks:
            low = max(1, old // ranks)
            return (f"no train_batch_per_replica gives {old:,} on {ranks} rank(s) ({old:,} is not a multiple of {ranks}); "
                    f"the nearest: {BATCH_KEY}={low} (global {low * ranks:,}) or {low + 1} (global {(low + 1) * ranks:,})")
        want = old // ranks
        use_mini = mini if not want % mini else math.gcd(want, mini)
        extra = f" with {MINI_BATCH_KEY}={use_mini}" if use_mini != mini else ""
        steps = f", {self.after.with_batch(want, use_mini).steps_per_epoch:,} optimizer steps per epoch" if self.records else ""
        return (f"set {BATCH_KEY}={want}{extra} to keep {old:,} ({want // use_mini} forward/backward pass(es) of mini_batch {use_mini} "
                f"per step: gradient accumulation, the memory of one pass unchanged{steps})")

    def line(self) -> str:
        b, a = self.before, self.after
        parts = []
        if b.global_batch != a.global_batch:
            parts.append(f"global batch {b.global_batch:,} -> {a.global_batch:,} (train_batch_per_replica {b.batch_per_rank} -> "
                         f"{a.batch_per_rank} per rank x data-parallel ranks {b.ranks} -> {a.ranks}, dp_shard_size x dp_replicate_size)")
        if self.records and b.steps_per_epoch != a.steps_per_epoch:
            parts.append(f"optimizer steps per epoch {b.steps_per_epoch:,} -> {a.steps_per_epoch:,} at {self.records:,} train records")
        fix = f"; {self.keep()}" if b.global_batch != a.global_batch else ""
        return f"{self.what}: " + "; ".join(parts) + fix

    def to_dict(self) -> dict[str, Any]:
        b, a = self.before, self.after
        changed = b.global_batch != a.global_batch
        return {"global_batch": {"from": b.global_batch, "to": a.global_batch},
                "train_batch_per_replica": {"from": b.batch_per_rank, "to": a.batch_per_rank},
                "data_parallel_ranks": {"from": b.ranks, "to": a.ranks},
                "steps_per_epoch": {"from": b.steps_per_epoch, "to": a.steps_per_epoch} if self.records else None,
                "records": self.records, "keep": self.keep() if changed else None, "line": self.line()}


def batch_change(before: Any, after: Any, records: int | None = None, what: str | None = None) -> BatchChange | None:
    """How the global batch (and, with `records`, the optimizer steps per epoch at that count) of train spec `after`
    differ from `before`'s (None when neither does); `what` opens the line (default: "changed from the --from spec")."""
    b, a = step_plan(before, records or 0), step_plan(after, records or 0)
    if b.global_batch == a.global_batch and not (records and b.steps_per_epoch != a.steps_per_epoch):
        return None
    return BatchChange(b, a, records, *([what] if what else []))
