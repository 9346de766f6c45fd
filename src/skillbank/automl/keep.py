"""The checkpoints a study keeps (`skillbank automl --keep best|all`, recorded in the study: KEEP_ATTR).

Each trial keeps every epoch's checkpoint and export while it runs (the study evaluates each export). With
"best" (a new study's default) a finished trial (complete, pruned or failed) that is not the best so far drops
its checkpoints and exports; its metrics, spec, evaluation results and logs stay. The best trial keeps its best
epoch's checkpoint and export (the one best_rec.json names) and drops its other epochs'. When a later trial
becomes the best, the previous best's go. runs.disk.study_disk sizes the disk by the same rule.

Sweeping is idempotent and never touches a running trial: a worker sweeps after each trial it finishes, from a
snapshot of the study; a trial that is not the best in a snapshot is never the best later (the best value only
improves), so workers sweeping at once agree. A study created before the rule was recorded kept everything:
it keeps "all".
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from skillbank.runs import layout
from skillbank.runs.disk import DEFAULT_KEEP, KEEP_RULES

KEEP_ATTR = "skillbank.keep"
BEFORE_THE_RULE = "all"  # what a study without KEEP_ATTR did
FINISHED = ("COMPLETE", "PRUNED", "FAIL")


def recorded_keep(attrs: dict[str, Any]) -> str:
    return str(attrs.get(KEEP_ATTR) or BEFORE_THE_RULE)


def check_keep(value: str | None) -> str:
    if value is not None and value not in KEEP_RULES:
        from skillbank.errors import InputError

        raise InputError(f"unknown --keep {value!r}", where="--keep", fix=f"one of: {', '.join(KEEP_RULES)}")
    return value or DEFAULT_KEEP


def _runs(trial: Any) -> list[Path]:
    folder = trial.user_attrs.get("trial_dir")
    return layout.run_dirs(Path(folder) / "train") if folder and (Path(folder) / "train").is_dir() else []


def _steps(run: Path) -> list[int]:
    return sorted(set(layout.list_checkpoint_steps(run, complete_only=False)) | set(layout._steps(run / "safetensors")))


def best_step(trial: Any, run: Path, maximize: bool) -> int | None:
    """The step of the trial's best epoch: its checkpoint (safetensors/step_N, what best_rec.json names), else the
    best epoch of its history (a loss metric) counted along the run's saved steps (one per epoch)."""
    checkpoint = trial.user_attrs.get("checkpoint")
    if checkpoint:
        found = layout.STEP_DIR.match(Path(checkpoint).name)
        if found and Path(checkpoint).parent.parent == run:
            return int(found.group(1))
    history = [(int(e), float(v)) for e, v in trial.user_attrs.get("history") or []]
    saved = _steps(run)
    if not history or not saved:
        return saved[-1] if saved else None
    epoch = (max if maximize else min)(history, key=lambda ev: (ev[1], -ev[0]) if maximize else (ev[1], ev[0]))[0]
    return saved[min(len(saved), max(1, epoch)) - 1]


def _drop(run: Path, keep_step: int | None) -> float:
    """Remove the run's checkpoints and exports but `keep_step`'s; returns the bytes freed."""
    freed = 0.0
    for step in _steps(run):
        if step == keep_step:
            continue
        for folder in (layout.checkpoint_dir(run, step).parent, layout.safetensors_dir(run, step)):
            if folder.exists():
                freed += sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())
                shutil.rmtree(folder, ignore_errors=True)
    return freed


def sweep(study: Any, keep: str) -> tuple[list[int], float]:
    """Apply the keep rule to the study's finished trials (see the module docstring): (the trials whose checkpoints went, bytes freed)."""
    if keep != "best":
        return [], 0.0
    trials = study.get_trials(deepcopy=False)
    maximize = study.direction.name.lower() == "maximize"
    try:
        best = study.best_trial  # the one best_rec.json names
    except ValueError:  # no complete trial yet
        best = None
    dropped, freed = [], 0.0
    for trial in trials:
        if trial.state.name not in FINISHED:
            continue
        for run in _runs(trial):
            keep_step = best_step(trial, run, maximize) if best is not None and trial.number == best.number else None
            gone = _drop(run, keep_step)
            if gone:
                freed += gone
                if trial.number not in dropped:
                    dropped.append(trial.number)
    return dropped, freed
