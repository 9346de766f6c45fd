"""The run's arithmetic, once: records per rank, global batch, optimizer steps, checkpoints (their sizes: runs.disk).

cosmos-rl 0.4.7 (policy/worker/sft_worker.py) shards the train records with a DistributedSampler
that pads every data-parallel rank to ceil(records / ranks) by wrapping around to the first records
(it drops to floor(records / ranks) instead only with pipeline parallelism), then a DataLoader
takes train_batch_per_replica of a rank's records per optimizer step and drops the last incomplete
batch (train.train_policy.dataloader_drop_last, default true; our TOML sets it explicitly). Steps
in all = steps per epoch x epochs, capped by max_num_steps. A checkpoint is saved every
save_freq_in_epoch x steps-per-epoch steps (or every save_freq steps) and at the last step;
max_keep keeps the newest, and cosmos-rl also spares the best-scoring one while validation scores.

Preflight, `skillbank spec`, the cosmos-rl TOML and the local backend (whose sampler is
`StepPlan.rank_share` + `rank_batch`) all count here, so the plan shown is the run that happens.
Light: no torch.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from skillbank.data.split import check_val_dataset, train_split_size
from skillbank.errors import InputError

DATALOADER_DROP_LAST = True  # what the TOML writes as train.train_policy.dataloader_drop_last
FEW_STEPS_PER_EPOCH = 4  # fewer optimizer steps per epoch than this: the run barely trains (a preflight warning)
GB = 1024**3  # GiB: every disk figure (JSON keys *_gb included) is in GiB, as `skillbank plan` shows them


def gib(nbytes: float) -> float:
    """A byte count as the GiB figure every JSON document holds (*_gb, *_gib): two decimals, what `gib_text` prints."""
    return round(nbytes / GB, 2)


def gib_text(nbytes: float) -> str:
    """The one way a disk figure prints (spec, preflight's env.disk, plan, the AutoML dry run): `gib`'s two decimals,
    so the text and the JSON never round one figure two ways (143.65 GiB, not 143.7 here and 143.6 there)."""
    return gib_value_text(nbytes / GB)


def gib_value_text(value: float) -> str:
    """A figure already in GiB (a JSON value of `gib`) printed as `gib_text` prints its bytes."""
    return f"{round(value, 2):,.2f} GiB"


# ---- steps -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class StepPlan:
    """How one run's train records become optimizer steps (cosmos-rl's sampler and data loader)."""

    records: int  # train records after any validation split
    ranks: int  # data-parallel ranks: dp_shard_size x dp_replicate_size
    batch_per_rank: int  # train.train_batch_per_replica: records per rank per optimizer step
    epochs: int
    max_num_steps: int | None = None
    mini_batch: int = 1
    pad: bool = True  # DistributedSampler(drop_last=False): wrap around to ceil(records / ranks)
    drop_last: bool = DATALOADER_DROP_LAST

    @property
    def records_per_rank(self) -> int:
        return -(-self.records // self.ranks) if self.pad else self.records // self.ranks

    @property
    def repeated(self) -> int:
        """Records the padding trains twice per epoch (the first ones of the epoch's order)."""
        return self.records_per_rank * self.ranks - self.records if self.pad else 0

    @property
    def global_batch(self) -> int:
        return self.ranks * self.batch_per_rank

    @property
    def accumulation(self) -> int:
        """Forward/backward passes per optimizer step on each rank (batch / mini_batch)."""
        return max(1, self.batch_per_rank // self.mini_batch)

    @property
    def steps_per_epoch(self) -> int:
        per_rank = self.records_per_rank
        return per_rank // self.batch_per_rank if self.drop_last else -(-per_rank // self.batch_per_rank)

    @property
    def unused_per_rank(self) -> int:
        """Records of each rank's share left out of every epoch by the dropped incomplete batch."""
        return max(0, self.records_per_rank - self.steps_per_epoch * self.batch_per_rank)

    @property
    def total_steps(self) -> int:
        total = self.steps_per_epoch * self.epochs
        return min(total, self.max_num_steps) if self.max_num_steps else total

    def epoch_of(self, step: int) -> int:
        """Epoch (0-based) of the step after `step` completed steps."""
        return step // self.steps_per_epoch if self.steps_per_epoch else 0

    def rank_share(self, order: list[int], rank: int) -> list[int]:
        """DistributedSampler's share of `rank` in an epoch whose shuffled record order is `order`:
        the order padded by wrapping around to records_per_rank x ranks (or cut, without padding),
        then every ranks-th index from `rank`."""
        size = self.records_per_rank * self.ranks
        padded = (order * -(-size // len(order)))[:size] if order else []
        return padded[rank : size : self.ranks]

    def rank_batch(self, share: list[int], step_in_epoch: int) -> list[int]:
        """The DataLoader's batch of a rank's share at one step: batch_per_rank consecutive indices."""
        start = step_in_epoch * self.batch_per_rank
        return share[start : start + self.batch_per_rank]

    def with_batch(self, batch: int, mini_batch: int | None = None) -> "StepPlan":
        return StepPlan(self.records, self.ranks, batch, self.epochs, self.max_num_steps, mini_batch or self.mini_batch, self.pad, self.drop_last)

    def to_dict(self) -> dict[str, Any]:
        return {
            "train_records": self.records,
            "data_parallel_ranks": self.ranks,
            "records_per_rank": self.records_per_rank,
            "repeated_records": self.repeated,
            "train_batch_per_replica": self.batch_per_rank,
            "mini_batch": self.mini_batch,
            "accumulation_steps": self.accumulation,
            "global_batch": self.global_batch,
            "steps_per_epoch": self.steps_per_epoch,
            "unused_records_per_rank": self.unused_per_rank,
            "epochs": self.epochs,
            "max_num_steps": self.max_num_steps,
            "total_steps": self.total_steps,
        }


def data_parallel_ranks(spec: Any) -> int:
    """cosmos-rl's `dp` mesh: dp_replicate_size x dp_shard_size (tp, cp and pp ranks share a batch)."""
    par = spec.policy.parallelism
    return par.dp_shard_size * par.dp_replicate_size


def parallel_shape(spec: Any) -> tuple[int, int]:
    """(nodes, GPUs per node): dp_replicate_size, and dp_shard * tp * cp * pp; an rl spec: one node with
    the policy's GPUs plus the rollout engines'."""
    if not hasattr(spec.policy.parallelism, "dp_replicate_size"):  # RlSpec
        return 1, spec.gpus  # type: ignore[attr-defined]
    par = spec.policy.parallelism
    return par.dp_replicate_size, par.dp_shard_size * par.tp_size * par.cp_size * par.pp_size


def step_plan(spec: Any, train_records: int) -> StepPlan:
    """The StepPlan of a train spec for `train_records` records (after any validation split)."""
    train = spec.train
    return StepPlan(
        records=train_records,
        ranks=data_parallel_ranks(spec),
        batch_per_rank=train.train_batch_per_replica,
        epochs=train.epoch,
        max_num_steps=train.max_num_steps,
        mini_batch=train.train_policy.mini_batch,
        pad=spec.policy.parallelism.pp_size == 1,
    )


def useful_batches(plan: StepPlan, target: int = FEW_STEPS_PER_EPOCH, most: int = 3) -> list[tuple[int, int, int]]:
    """Batches (train_batch_per_replica, mini_batch, steps per epoch) smaller than the plan's that
    give at least `target` optimizer steps per epoch: the largest such multiple of mini_batch, then
    power-of-two multiples below it. When even mini_batch gives fewer, mini_batch itself and batch 1."""
    mini, per_rank = plan.mini_batch, plan.records_per_rank
    top = (per_rank // target) // mini * mini
    found: list[tuple[int, int, int]] = []

    def add(batch: int, batch_mini: int) -> None:
        if batch < plan.batch_per_rank and per_rank // batch >= 1 and all(batch != b for b, _, _ in found) and len(found) < most:
            found.append((batch, batch_mini, per_rank // batch))

    if top >= mini:
        for batch in [top] + [mini * 2**k for k in range(int(math.log2(top // mini)), -1, -1)]:
            add(batch, mini)
    if not found:
        add(mini, mini)
        add(1, 1)
    return found


def describe_batches(plan: StepPlan, options: list[tuple[int, int, int]]) -> str:
    """One fix text: each proposed batch with the steps it gives per epoch and in all."""
    def one(batch: int, mini: int, per_epoch: int) -> str:
        total = plan.with_batch(batch, mini).total_steps
        extra = f" with train.train_policy.mini_batch={mini}" if mini != plan.mini_batch else ""
        return f"train.train_batch_per_replica={batch}{extra} ({per_epoch} steps per epoch, {total} in all)"
    return "; ".join(one(*o) for o in options)


ZERO_STEPS = "the run trains zero steps and crashes with \"'NoneType' object has no attribute 'state_dict'\""


@dataclass(frozen=True)
class StepsProblem:
    severity: str  # "error": zero steps; "warning": fewer than FEW_STEPS_PER_EPOCH per epoch
    message: str
    fix: str
    where: str = "train.train_batch_per_replica"


def steps_problem(spec: Any, count: "TrainCount") -> StepsProblem | None:
    """Zero optimizer steps (an error) or fewer than FEW_STEPS_PER_EPOCH per epoch (the run barely
    trains: a warning), with batches that give a useful number of steps and how many each gives."""
    plan = step_plan(spec, count.train)
    if plan.steps_per_epoch >= FEW_STEPS_PER_EPOCH:
        return None
    after = f" ({count.annotated:,} annotated, {count.split:,} taken by the validation split)" if count.split else ""
    share = (
        f"{plan.records:,} train records{after} over {plan.ranks} data-parallel rank(s) (dp_shard_size x dp_replicate_size) "
        f"give {plan.records_per_rank:,} per rank"
    )
    options = useful_batches(plan)
    others = ["use fewer data-parallel ranks", "add records"]
    if count.split and spec.train.train_policy.dataset.test_size is None:
        others.append("give custom.val_dataset so train is not split")
    fix = (f"set {describe_batches(plan, options)}; or " if options else "") + ", or ".join(others)
    if plan.steps_per_epoch == 0:
        return StepsProblem("error", f"{share}, fewer than train.train_batch_per_replica {plan.batch_per_rank}: {ZERO_STEPS}", fix)
    return StepsProblem(
        "warning",
        f"{share}: train.train_batch_per_replica {plan.batch_per_rank} gives {plan.steps_per_epoch} optimizer step(s) per epoch, "
        f"{plan.total_steps} in all: the run barely trains (fewer than {FEW_STEPS_PER_EPOCH} per epoch)",
        fix,
    )


def validation_batches(val_records: int, ranks: int, batch_size: int) -> tuple[int, int]:
    """(records per rank, batches per rank) of cosmos-rl's validation: the same padding sampler, then
    batches of validation.batch_size with the incomplete one dropped (dataloader_drop_last applies to
    the validation loader too; a run with no batch logs a validation loss of 0)."""
    per_rank = -(-val_records // ranks)
    return per_rank, per_rank // batch_size if DATALOADER_DROP_LAST else -(-per_rank // batch_size)


BATCH_KEY = "train.train_batch_per_replica"
VALIDATION_BATCH_KEY = "validation.batch_size"


def validation_problem(spec: Any, count: "TrainCount", val_records: int | None) -> StepsProblem | None:
    """Validation on with zero batches per rank (an error of the plan): cosmos-rl drops the incomplete
    validation batch too, validates nothing and logs a validation loss of 0."""
    val = count.split or val_records
    if not spec.validation.enable or not val:
        return None
    ranks, size = data_parallel_ranks(spec), spec.validation.batch_size
    per_rank, batches = validation_batches(val, ranks, size)
    if batches:
        return None
    return StepsProblem(
        "error",
        f"{val:,} validation records over {ranks} data-parallel rank(s) give {per_rank:,} per rank, fewer than validation.batch_size {size}: "
        "cosmos-rl drops the incomplete validation batch too (dataloader_drop_last), validates nothing and logs a validation loss of 0",
        f"set validation.batch_size={per_rank} or lower, add validation records, or set validation.enable=false",
        VALIDATION_BATCH_KEY,
    )


def plan_errors(spec: Any, count: "TrainCount", val_records: int | None) -> list[StepsProblem]:
    """The plan's errors (what `skillbank spec` refuses): zero optimizer steps, zero validation batches."""
    found = [steps_problem(spec, count), validation_problem(spec, count, val_records)]
    return [p for p in found if p is not None and p.severity == "error"]


# ---- rl (GRPO): samples per policy step -----------------------------------------------------------


def split_groups(spec: Any) -> tuple[str, str] | None:
    """(message, fix) when the batch would split a prompt's samples across policy steps: the local backend
    takes whole prompts per step (cosmos-rl buffers samples across steps; one process does not)."""
    batch, g = spec.train.train_batch_per_replica, spec.rollout.n_generation
    if not batch % g:
        return None
    below, above = max(g, batch - batch % g), batch - batch % g + g
    return (f"{BATCH_KEY} ({batch}) is not a multiple of rollout.n_generation ({g}): the local backend takes "
            f"{BATCH_KEY} / n_generation whole prompts per policy step",
            f"set {BATCH_KEY}={below} or {above} (keep it a multiple of train.train_policy.mini_batch x policy.parallelism.dp_shard_size too)")


def no_step(spec: Any, prompts: int) -> tuple[str, str] | None:
    """(message, fix) when one epoch's rollout samples (prompts x n_generation) fill no policy step."""
    samples, batch = prompts * spec.rollout.n_generation, spec.train.train_batch_per_replica
    if samples >= batch:
        return None
    unit = spec.policy.parallelism.dp_shard_size * spec.train.train_policy.mini_batch  # the spec model's divisibility rule
    return (f"{prompts:,} prompts x rollout.n_generation {spec.rollout.n_generation} = {samples:,} samples per epoch, "
            f"fewer than {BATCH_KEY} {batch}: no policy step would run",
            f"set {BATCH_KEY}={max(unit, samples - samples % unit)} or add prompts")


# ---- records ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TrainCount:
    annotated: int  # records in custom.train_dataset.annotation_path
    split: int  # taken for validation (validation.enable without custom.val_dataset)

    @property
    def train(self) -> int:
        return self.annotated - self.split


def train_count(spec: Any, annotated: int) -> TrainCount:
    return TrainCount(annotated, train_split_size(spec, annotated))


def count_records(path: str) -> int:
    """Records of a LLaVA annotations file (a JSON array), streamed: memory stays flat on huge files."""
    from pathlib import Path

    from skillbank.data.jsonstream import ArrayFormatError, iter_batches

    file = Path(path).expanduser()
    if not file.is_file():
        raise InputError(f"annotation file not found: {file}", where=str(file), fix="check custom.train_dataset.annotation_path")
    try:
        return sum(len(batch) for batch in iter_batches(str(file)))
    except ArrayFormatError as exc:
        raise InputError(f"annotation file is not a JSON array of records: {exc}", where=str(file), fix="run `skillbank preflight` for every problem of the file") from None


def read_train_count(spec: Any) -> TrainCount:
    """Count the spec's train records (InputError when there are none to count)."""
    path = spec.custom.train_dataset.annotation_path
    if not path:
        raise InputError("no training annotations", where="custom.train_dataset.annotation_path", fix="set it to a LLaVA annotations.json")
    check_val_dataset(spec)
    return train_count(spec, count_records(path))


def count_data(spec: Any) -> tuple["TrainCount", int | None]:
    """(train count, custom.val_dataset's records or None) of a train spec, counted from its files
    (InputError when the train annotations cannot be counted; an unreadable val file counts as None)."""
    count = read_train_count(spec)
    val = spec.custom.val_dataset
    val_records = None
    if spec.validation.enable and val is not None and val.annotation_path:
        try:
            val_records = count_records(val.annotation_path)
        except InputError:
            pass  # preflight reports the file
    return count, val_records


# ---- checkpoints and disk ----------------------------------------------------------------------------


@dataclass(frozen=True)
class CheckpointPlan:
    every: int | None  # optimizer steps between saves (None: the step count is not known)
    saved: int  # checkpoints written over the run (the last step always saves)
    kept: int  # the most on disk at once
    rule: str
    exact: bool = True  # False: the steps were not known, saved / kept are upper bounds

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def checkpoint_plan(spec: Any, plan: StepPlan | None = None) -> CheckpointPlan | None:
    """What train.ckpt saves and keeps (None when checkpoints are off). Without a plan (records not
    counted) saves by epoch are exact unless max_num_steps may end the run sooner; otherwise the
    counts are upper bounds, or max_keep when nothing bounds them (`exact` false)."""
    c = spec.train.ckpt
    if not c.enable_checkpoint:
        return None
    by_epoch = c.save_freq_in_epoch > 0
    rule = f"every {c.save_freq_in_epoch} epoch(s)" if by_epoch else f"every {c.save_freq} steps"
    if plan is not None:
        exact = True
        every = c.save_freq_in_epoch * plan.steps_per_epoch if by_epoch else c.save_freq
        saved = -(-plan.total_steps // every) if plan.total_steps else 0
    elif by_epoch:
        exact = not spec.train.max_num_steps
        every, saved = None, -(-spec.train.epoch // c.save_freq_in_epoch)
    else:
        exact, every = False, c.save_freq
        saved = -(-spec.train.max_num_steps // every) if spec.train.max_num_steps else max(c.max_keep, 1)
    best = 1 if spec.validation.enable and c.max_keep >= 1 else 0
    kept = min(saved, c.max_keep + best) if c.max_keep >= 1 else saved
    keep = "all kept (max_keep -1)" if c.max_keep < 1 else f"max_keep {c.max_keep}" + (" + the best-scoring one cosmos-rl spares" if best else "")
    return CheckpointPlan(every, saved, kept, f"{rule} and at the last step; {keep}", exact)


# ---- the plan shown -------------------------------------------------------------------------------


def run_plan(spec: Any, count: TrainCount, *, val_records: int | None = None, disk: Any = None) -> dict[str, Any]:
    """The plan `skillbank spec` and `skillbank preflight` state (JSON-ready; `plan_lines` renders it).
    `val_records`: custom.val_dataset's records when counted (a split of train is known here); `disk`: the
    run's runs.disk.DiskNeed, when the caller sized it (runs.disk.run_disk)."""
    plan = step_plan(spec, count.train)
    ckpts = checkpoint_plan(spec, plan)
    val = count.split or val_records
    validation = None
    if spec.validation.enable and val:
        per_rank, batches = validation_batches(val, plan.ranks, spec.validation.batch_size)
        validation = {"records": val, "records_per_rank": per_rank, "batch_size": spec.validation.batch_size, "batches_per_rank": batches}
    return {
        "annotated_records": count.annotated,
        "validation_split": count.split,
        **plan.to_dict(),
        "validation": validation,
        "checkpoints": ckpts.to_dict() if ckpts else None,
        "disk": disk.to_dict() if disk else None,
    }


def plan_lines(plan: dict[str, Any]) -> list[str]:
    """The plan in a few lines for a person (the same numbers as the JSON)."""
    p = plan
    split = f" - {p['validation_split']:,} split off for validation" if p["validation_split"] else ""
    pad = f", {p['repeated_records']:,} repeated to pad the ranks evenly" if p["repeated_records"] else ""
    unused = f"; {p['unused_records_per_rank']:,} per rank left out of each epoch (incomplete batch dropped)" if p["unused_records_per_rank"] else ""
    cap = f", capped by max_num_steps {p['max_num_steps']:,}" if p["max_num_steps"] and p["max_num_steps"] < p["steps_per_epoch"] * p["epochs"] else ""
    lines = [
        f"plan: {p['annotated_records']:,} train records{split} = {p['train_records']:,} over {p['data_parallel_ranks']} data-parallel rank(s) "
        f"-> {p['records_per_rank']:,} per rank{pad}",
        f"  global batch {p['global_batch']:,} = train_batch_per_replica {p['train_batch_per_replica']} per rank x {p['data_parallel_ranks']} rank(s) "
        f"({p['accumulation_steps']} forward/backward of mini_batch {p['mini_batch']} per step)",
        f"  {p['steps_per_epoch']:,} optimizer steps per epoch{unused}; {p['total_steps']:,} in all over {p['epochs']} epoch(s){cap}",
    ]
    v = p.get("validation")
    if v:
        lines.append(f"  validation: {v['records']:,} records -> {v['records_per_rank']:,} per rank, {v['batches_per_rank']} batch(es) of {v['batch_size']} per rank")
    c = p.get("checkpoints")
    lines.append(f"  checkpoints: {c['saved']} saved ({c['rule']}), at most {c['kept']} on disk" if c else "  checkpoints: off (train.ckpt.enable_checkpoint false)")
    d = p.get("disk")
    if d:
        study = f" x {d['trials']} trials" if d["trials"] > 1 else ""
        lines.append(f"  disk: ~{gib_value_text(d['checkpoint_gb'])} per checkpoint ({d['what']}; {d['params'] / 1e9:.2f}B parameters from {d['params_from']}), "
                     f"~{gib_value_text(d['total_gb'])} for {d['kept']} kept{study}")
    return lines
