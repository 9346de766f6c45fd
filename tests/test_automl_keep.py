"""--keep best on a study's folders (automl.keep.sweep): a finished trial that is not the best drops its checkpoints and
exports, the best keeps its best epoch's only (by its export, or by its history with a loss metric), a running trial is
never touched, and a later best takes the place of the previous one. The real 3-trial study: test_automl_trials."""

from __future__ import annotations

from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState, create_trial

from skillbank.automl.keep import sweep
from skillbank.runs import layout

RUN = "20250101000000"


def _trial_dir(root: Path, number: int, steps: list[int]) -> Path:
    folder = root / f"trial_{number:04d}"
    run = folder / "train" / RUN
    for step in steps:
        policy = layout.checkpoint_dir(run, step)
        policy.mkdir(parents=True)
        (policy / "model_rank_0.pth").write_bytes(b"\0" * 100)
        export = layout.safetensors_dir(run, step)
        export.mkdir(parents=True)
        (export / "config.json").write_text("{}")
        (export / "model.safetensors").write_bytes(b"\0" * 50)
    (run / "metrics.jsonl").write_text("")
    (folder / "spec.yaml").write_text("x: 1\n")
    return folder


def _held(folder: Path) -> list[tuple[str, str]]:
    return sorted((p.parent.name, p.name) for kind in ("checkpoints", "safetensors") for p in (folder / "train").glob(f"*/{kind}/step_*"))


def _add(study, number: int, folder: Path, state: TrialState, value: float | None, *, checkpoint: int | None = None,
         history: list[tuple[int, float]] = ()) -> None:
    attrs = {"trial_dir": str(folder), "history": list(history),
             "checkpoint": str(layout.safetensors_dir(folder / "train" / RUN, checkpoint)) if checkpoint else None}
    study.add_trial(create_trial(state=state, value=value, user_attrs=attrs) if state != TrialState.RUNNING
                    else create_trial(state=state, user_attrs=attrs))


@pytest.mark.parametrize("direction", ["maximize", "minimize"])
def test_only_the_best_trials_best_epoch_is_kept(tmp_path, direction):
    study = optuna.create_study(direction=direction)
    good, bad = (0.9, 0.1) if direction == "maximize" else (0.1, 0.9)
    folders = [_trial_dir(tmp_path, n, [2, 4, 6]) for n in range(4)]
    _add(study, 0, folders[0], TrialState.COMPLETE, bad, checkpoint=6)
    _add(study, 1, folders[1], TrialState.COMPLETE, good, checkpoint=4)  # the best: its epoch-2 export
    _add(study, 2, folders[2], TrialState.PRUNED, None)
    _add(study, 3, folders[3], TrialState.RUNNING, None)
    dropped, freed = sweep(study, "best")
    assert sorted(dropped) == [0, 1, 2] and freed == (3 + 3 + 2) * 152  # trials 0 and 2 whole, trial 1 all but step 4 (152 bytes a step)
    assert _held(folders[1]) == [("checkpoints", "step_4"), ("safetensors", "step_4")]
    assert _held(folders[0]) == _held(folders[2]) == [] and len(_held(folders[3])) == 6  # the running trial untouched
    assert (folders[0] / "spec.yaml").is_file() and (folders[0] / "train" / RUN / "metrics.jsonl").is_file()
    assert sweep(study, "best") == ([], 0.0)  # idempotent
    assert sweep(study, "all") == ([], 0.0)


def test_a_loss_metric_keeps_the_best_epoch_of_the_history_and_a_later_best_replaces_it(tmp_path):
    study = optuna.create_study(direction="minimize")
    first = _trial_dir(tmp_path, 0, [3, 6, 9])
    _add(study, 0, first, TrialState.COMPLETE, 0.5, history=[(1, 0.7), (2, 0.5), (3, 0.6)])  # val_loss: no export named
    sweep(study, "best")
    assert _held(first) == [("checkpoints", "step_6"), ("safetensors", "step_6")]  # epoch 2: the second saved step
    second = _trial_dir(tmp_path, 1, [3, 6, 9])
    _add(study, 1, second, TrialState.COMPLETE, 0.4, history=[(1, 0.6), (2, 0.45), (3, 0.4)])
    dropped, _ = sweep(study, "best")
    assert dropped == [0, 1] and _held(first) == [] and _held(second) == [("checkpoints", "step_9"), ("safetensors", "step_9")]
