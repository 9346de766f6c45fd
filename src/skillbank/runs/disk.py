"""Every disk figure, once. `checkpoint_size` is the one size of one checkpoint; `run_disk` sizes a run's
checkpoints (`skillbank spec`, preflight's env.disk, the launchers' plan, `skillbank plan`) and `study_disk` an
AutoML study's (`skillbank plan --trials`, the AutoML dry run, the preflight gate of every worker and of an
AutoML job). They count parameters with `counts` (models.params.light_count: the shipped meta-device count of a
known shape, LoRA's adapters from its module table; no torch), so every command prints the same number.

A checkpoint holds the model state at fp32 master precision and Adam's two fp32 moments of the trained
parameters, plus its export at param_dtype. With LoRA, cosmos-rl 0.4.7 saves the whole model's state dict,
the frozen base included (policy/trainer/llm_trainer/sft_trainer.py `_checkpointing`: model_to_save =
self.model; utils/checkpoint.py `save_checkpoint`: model.state_dict()), and resumes from it alone
(`load_checkpoint`: load_state_dict(strict=True), the Hub weights not read on resume); no key keeps the
trainable weights only. It exports the adapter only. The local backend keeps a LoRA checkpoint's trained
weights and optimizer alone (the base is read from the model folder on resume) and exports the adapter, as cosmos-rl does.

A study (`StudyShape`): every trial saves and exports each epoch (TRIAL_CKPT: the study evaluates each epoch's
export) and keeps them while it runs. `keep` "best" (the default of a new study): a finished trial that is not the
best so far drops its checkpoints, the best keeps its best epoch's checkpoint and export; "all" keeps everything.
A worker's share: its running trials' every epoch + the best one; at most: the study's trials at once on one file
system. Sized at the searched space's largest checkpoint (the top of a searched policy.lora.r range; the full model
when the search may turn LoRA off) and the most epochs a trial trains: an upper bound (pruned trials stop sooner).
Light: no torch.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from skillbank.models.params import ParamCount, light_count
from skillbank.runs import steps
from skillbank.runs.steps import gib, gib_text

MASTER_BYTES = 4  # cosmos-rl keeps fp32 master weights (train.master_dtype): what a checkpoint's model state holds
ADAM_BYTES = 8  # two fp32 moments per trained parameter
DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4}
KEEP_RULES = ("best", "all")
DEFAULT_KEEP = "best"
# Every trial saves and exports each epoch and keeps them while it runs: the study evaluates each epoch's export.
TRIAL_CKPT = {"enable_checkpoint": True, "export_safetensors": True, "save_freq_in_epoch": 1, "save_freq": None, "max_keep": -1}


def counts(spec: Any) -> ParamCount | None:
    """The parameters (and trained ones) every disk figure counts: models.params.light_count of the spec's model and LoRA
    (None: a model folder only the node has, whose job's preflight sizes the disk there; a hub id the bank cannot
    count: models.params.unknown_model)."""
    return light_count(spec.policy.model_name_or_path.strip(), spec.policy.lora)


def trainable_only(spec: Any, backend: str | None) -> bool:
    """A checkpoint of the trained weights and the optimizer alone: the local backend's LoRA runs (cosmos-rl saves the base too)."""
    return bool(spec.policy.lora.enable) and backend == "local"


@dataclass(frozen=True)
class CheckpointSize:
    state: float  # the model state + Adam's moments, all ranks together
    export: float  # one safetensors export
    what: str


def checkpoint_size(spec: Any, count: ParamCount, backend: str | None = None) -> CheckpointSize:
    """One checkpoint of this spec (see the module docstring for what each backend keeps)."""
    lora = spec.policy.lora.enable
    model = (count.trainable if trainable_only(spec, backend) else count.total) * MASTER_BYTES
    exported = count.trainable if lora else count.total  # a LoRA run exports the adapter on both backends
    dtype = spec.train.param_dtype
    if not lora:
        what = f"full fine-tuning: fp32 weights, Adam moments, plus the {dtype} export"
    elif backend == "local":
        what = f"LoRA (rank {spec.policy.lora.r}): the adapters and their Adam moments (the base is read from the model on resume), plus the adapter it exports"
    else:
        what = f"LoRA (rank {spec.policy.lora.r}): the frozen base and the adapters (cosmos-rl saves the whole model), plus the adapter it exports"
    return CheckpointSize(model + count.trainable * ADAM_BYTES, exported * DTYPE_BYTES.get(dtype, 2), what)


@dataclass(frozen=True)
class DiskNeed:
    params: float
    params_from: str
    checkpoint_bytes: float  # one checkpoint with its export
    kept: int  # checkpoints on disk at once, per run
    trials: int  # runs (1; a study is a StudyDisk)
    what: str  # what a checkpoint holds
    detail: str  # one sentence for a finding

    @property
    def total_bytes(self) -> float:
        return self.checkpoint_bytes * self.kept * self.trials

    def to_dict(self) -> dict[str, Any]:
        return {
            "params": self.params,
            "params_from": self.params_from,
            "checkpoint_gb": gib(self.checkpoint_bytes),
            "kept": self.kept,
            "trials": self.trials,
            "total_gb": gib(self.total_bytes),
            "what": self.what,
            "detail": self.detail,
        }


def run_disk(spec: Any, count: ParamCount | None = None, *, plan: steps.StepPlan | None = None, backend: str | None = None) -> DiskNeed | None:
    """Disk the run's checkpoints need at once (None when checkpoints are off, or the model is a folder only the node
    has): checkpoint_size x the checkpoints kept (steps.checkpoint_plan). `count`: counts(spec) unless given (the same figure)."""
    ckpts = steps.checkpoint_plan(spec, plan)
    if ckpts is None:
        return None
    count = count or counts(spec)
    if count is None:
        return None
    size = checkpoint_size(spec, count, backend)
    exports = 1.0 if spec.train.ckpt.export_safetensors else 1.0 / max(1, ckpts.kept)  # the last step always exports
    one = size.state + size.export * exports
    detail = (f"{size.what}: a checkpoint needs ~{gib_text(one)} ({count.total / 1e9:.2f}B parameters from {count.source}), "
              f"{ckpts.kept} kept ({ckpts.rule}): ~{gib_text(one * ckpts.kept)}")
    return DiskNeed(float(count.total), count.source, one, ckpts.kept, 1, size.what, detail)


# ---- an AutoML study ------------------------------------------------------------------------------


def trial_epochs(base_epochs: int, searched: Iterable[tuple[str, float]] = ()) -> int:
    """The most epochs a trial trains: the base spec's, or a searched train.epoch range's high end ((key, high) pairs)."""
    return max([int(base_epochs)] + [int(high) for key, high in searched if key == "train.epoch"])


@dataclass(frozen=True)
class StudyShape:
    """What a study's disk depends on beyond its base spec."""

    trials: int
    epochs: int | None = None  # the most epochs a trial trains (None: the base spec's train.epoch)
    workers: int = 1  # trials at once in the whole study
    per_worker: int = 1  # trials at once on one worker (automl --workers K)
    keep: str = DEFAULT_KEEP
    lora_rank: int | None = None  # the top of a searched policy.lora.r range
    full: bool = False  # the search may turn policy.lora.enable off: a trial may train every weight

    def preflight_flags(self) -> list[str]:
        """The flags of `skillbank preflight` that give a worker's gate this shape (commands/preflight reads them back)."""
        out = ["--trials", str(self.trials), "--trial-workers", str(self.per_worker), "--keep", self.keep]
        out += ["--trial-epochs", str(self.epochs)] if self.epochs else []
        out += ["--trial-lora-rank", str(self.lora_rank)] if self.lora_rank else []
        return out + (["--trial-full"] if self.full else [])

    def said(self) -> str:
        largest = "the full model (policy.lora.enable searched)" if self.full else (f"policy.lora.r {self.lora_rank}" if self.lora_rank else "")
        return (f"{self.trials} trial(s), {self.workers} at once ({self.per_worker} per worker), keep {self.keep}"
                + (f", up to {self.epochs} epoch(s)" if self.epochs else "") + (f", at {largest}" if largest else ""))


def study_shape(trials: int, base_epochs: int, params: Iterable[Any] = (), *, workers: int = 1, per_worker: int | None = None,
                keep: str = DEFAULT_KEEP) -> StudyShape:
    """The shape of a study over searched parameters (automl.space.Param: key, high, choices): the most epochs, the
    top of a searched LoRA rank, whether LoRA may be off."""
    params = list(params)
    epochs = trial_epochs(base_epochs, [(p.key, p.high) for p in params if p.high is not None])
    ranks = [int(p.high) for p in params if p.key == "policy.lora.r" and p.high is not None]
    ranks += [int(c) for p in params if p.key == "policy.lora.r" for c in p.choices]
    full = any(p.key == "policy.lora.enable" and (False in p.choices or "false" in p.choices) for p in params)
    return StudyShape(trials, epochs, workers, per_worker or workers, keep, max(ranks) if ranks else None, full)


def as_trial(spec: Any, epochs: int | None = None) -> Any:
    """The spec a trial trains, for its disk: TRIAL_CKPT, and `epochs` when given."""
    ckpt = spec.train.ckpt.model_copy(update=TRIAL_CKPT)
    train = spec.train.model_copy(update={"ckpt": ckpt, **({"epoch": int(epochs)} if epochs else {})})
    return spec.model_copy(update={"train": train})


def largest_trial(spec: Any, shape: StudyShape) -> Any:
    """The trial spec with the largest checkpoint the search can produce."""
    trial = as_trial(spec, shape.epochs)
    lora = trial.policy.lora
    if lora.enable and shape.full:
        lora = lora.model_copy(update={"enable": False})
    elif lora.enable and shape.lora_rank and shape.lora_rank > lora.r:
        lora = lora.model_copy(update={"r": shape.lora_rank})
    return trial.model_copy(update={"policy": trial.policy.model_copy(update={"lora": lora})})


@dataclass(frozen=True)
class StudyDisk:
    shape: StudyShape
    params: float
    params_from: str
    checkpoint_bytes: float  # one checkpoint of the base spec's trial
    largest_bytes: float  # one checkpoint of the largest trial the search can produce
    kept_per_trial: int  # a running trial keeps every epoch's
    per_worker_bytes: float
    at_most_bytes: float
    what: str
    detail: str

    def to_dict(self) -> dict[str, Any]:
        return {"disk_gib_per_worker": gib(self.per_worker_bytes), "disk_gib_at_most": gib(self.at_most_bytes),
                "checkpoint_gib": gib(self.checkpoint_bytes), "checkpoint_gib_largest": gib(self.largest_bytes),
                "kept_per_trial": self.kept_per_trial, "trials": self.shape.trials, "workers": self.shape.workers,
                "per_worker": self.shape.per_worker, "keep": self.shape.keep, "lora_rank": self.shape.lora_rank, "full": self.shape.full,
                "params": self.params, "params_from": self.params_from, "what": self.what, "detail": self.detail}


def study_disk(spec: Any, shape: StudyShape, *, records: int | None = None, backend: str | None = None) -> StudyDisk | None:
    """The study's disk: a worker's share and the whole study's at most (see the module docstring); None when
    checkpoints are off (never: TRIAL_CKPT). `records`: the train records (after any split), for a max_num_steps cap."""
    base, largest = as_trial(spec, shape.epochs), largest_trial(spec, shape)
    plan = steps.step_plan(largest, records) if records else None
    run = run_disk(largest, plan=plan, backend=backend)
    base_run = run_disk(base, plan=steps.step_plan(base, records) if records else None, backend=backend)
    if run is None or base_run is None:
        return None
    one, epochs, n = run.checkpoint_bytes, run.kept, shape.trials
    at_once = min(shape.workers, n)
    if shape.keep == "best":
        best = 1 if n > 1 else 0
        per_worker = (min(shape.per_worker, n) * epochs + best) * one
        at_most = (at_once * epochs + best) * one
        rule = (f"keep best: each running trial keeps its {epochs} epoch checkpoint(s), a finished one drops them unless it is the best "
                "so far (its best epoch's checkpoint and export stay)")
    else:
        share = min(n, math.ceil(n / max(1, shape.workers)) * shape.per_worker)
        per_worker, at_most = share * epochs * one, n * epochs * one
        rule = f"keep all: every trial keeps its {epochs} epoch checkpoint(s); a worker's share: {share} of the {n} trials"
    largest_said = "" if largest.policy.lora == base.policy.lora else \
        f"; at the search's largest checkpoint ({'the full model' if not largest.policy.lora.enable else f'policy.lora.r {largest.policy.lora.r}'}: " \
        f"~{gib_text(one)}, the base spec's ~{gib_text(base_run.checkpoint_bytes)})"
    detail = (f"{run.what}: ~{gib_text(one)} a checkpoint; an AutoML study ({shape.said()}); {rule}: ~{gib_text(per_worker)} per worker, "
              f"~{gib_text(at_most)} at most for the study on one file system{largest_said}; pruned trials keep fewer")
    return StudyDisk(shape, run.params, run.params_from, base_run.checkpoint_bytes, one, epochs, per_worker, at_most, run.what, detail)
