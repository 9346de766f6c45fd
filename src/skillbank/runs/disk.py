"""An AutoML study's disk, one figure: `skillbank plan --trials`, the AutoML dry run (`disk_gib`) and the
preflight gate of an AutoML job (`preflight --trials N --trial-epochs E`) all call `study_disk`.

Every trial saves and exports a checkpoint each epoch and keeps them all (TRIAL_CKPT: the study
evaluates each epoch's export), so a study keeps trials x epochs checkpoints at most, each as
`steps.disk_need` sizes it. `epochs` is the most a trial can train: the base spec's train.epoch, or
the high end of a searched train.epoch range (`trial_epochs`). An upper bound: pruned trials stop sooner.
Light: no torch.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from skillbank.runs import steps

# Every trial saves and exports each epoch, keeping all: the study evaluates each epoch's export.
TRIAL_CKPT = {"enable_checkpoint": True, "export_safetensors": True, "save_freq_in_epoch": 1, "save_freq": None, "max_keep": -1}


def trial_epochs(base_epochs: int, searched: Iterable[tuple[str, float]] = ()) -> int:
    """The most epochs a trial trains: the base spec's, or a searched train.epoch range's high end ((key, high) pairs)."""
    return max([int(base_epochs)] + [int(high) for key, high in searched if key == "train.epoch"])


def as_trial(spec: Any, epochs: int | None = None) -> Any:
    """The spec a trial trains, for its disk: TRIAL_CKPT, and `epochs` when given."""
    ckpt = spec.train.ckpt.model_copy(update=TRIAL_CKPT)
    train = spec.train.model_copy(update={"ckpt": ckpt, **({"epoch": int(epochs)} if epochs else {})})
    return spec.model_copy(update={"train": train})


def study_disk(spec: Any, params: float, *, trials: int, epochs: int | None = None, records: int | None = None, params_from: str = "",
               backend: str | None = None, trained: float | None = None) -> steps.DiskNeed | None:
    """The disk `trials` trials of this base spec keep at once (None when checkpoints are off in the trial spec: never).
    `records`: the train records (after any split), when counted, for a max_num_steps cap."""
    trial = as_trial(spec, epochs)
    plan = steps.step_plan(trial, records) if records else None
    need = steps.disk_need(trial, params, params_from=params_from, trials=trials, plan=plan, backend=backend, trained=trained)
    if need is None:
        return None
    detail = need.detail + f" (an AutoML study: each trial saves and exports every epoch and keeps all, up to {trial.train.epoch} epoch(s); pruned trials keep fewer)"
    return steps.DiskNeed(need.params, need.params_from, need.checkpoint_bytes, need.kept, need.trials, need.what, detail)


def study_disk_doc(spec: Any, params: float, *, trials: int, epochs: int | None = None, params_from: str = "") -> dict[str, Any]:
    """The study's disk as the AutoML dry run shows it: disk_gib (GiB, as `skillbank plan`), per checkpoint, kept, detail."""
    need = study_disk(spec, params, trials=trials, epochs=epochs, params_from=params_from)
    if need is None:
        return {"disk_gib": 0.0, "checkpoint_gib": 0.0, "kept_per_trial": 0, "trials": trials, "detail": "checkpoints off"}
    return {"disk_gib": round(need.total_bytes / steps.GB, 2), "checkpoint_gib": round(need.checkpoint_bytes / steps.GB, 2),
            "kept_per_trial": need.kept, "trials": need.trials, "detail": need.detail}
