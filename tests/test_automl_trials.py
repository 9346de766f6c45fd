"""A short real AutoML study on the tiny model: trials train with the local backend and are evaluated."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import jsonschema
import pyarrow.parquet as pq
import pytest

from helpers import ROOT, SKILL, skillbank


@pytest.fixture
def base_spec(tmp_path, tiny_model_dir, demo_dataset_dir) -> Path:
    spec = tmp_path / "base.yaml"
    proc = skillbank(
        "spec", "--skill", SKILL, "--action", "train", "--dataset-root", str(demo_dataset_dir),
        "--set", f"model={tiny_model_dir}", "--set", "dp_shard_size=1", "--set", "epoch=1",
        "--set", "batch_size=8", "--set", "mini_batch=8", "--set", "train.train_policy.dataloader_num_workers=0",
        "--set", "train.param_dtype=float32", "--set", "policy.model_gradient_checkpointing=false",
        "--set", f"output_dir={tmp_path / 'train'}", "--set", f"results_dir={tmp_path}", "-o", str(spec),
    )
    assert proc.returncode == 0, proc.stderr
    return spec


def _held(trial_dir: Path) -> list[str]:
    """The checkpoint and export folders a trial still holds."""
    return sorted(str(p.relative_to(trial_dir)) for kind in ("checkpoints", "safetensors") for p in (trial_dir / "train").glob(f"*/{kind}/step_*"))


def test_short_study_trains_evaluates_recommends_and_keeps_only_the_best_trials_checkpoint(base_spec, tmp_path):
    """Three trials with --keep best (a new study's default): exactly one trial, the best, holds a checkpoint and its export
    (the one best_rec.json names); the others keep their metrics, spec, evaluations and logs; the rule is recorded in the study."""
    proc = skillbank("automl", "--skill", SKILL, "--spec", str(base_spec), "--backend", "local", "--max-trials", "3", "--algorithm", "random",
                     "--param", "train.optm_lr", "--range", "train.optm_lr=1e-4:1e-3", "--json", timeout=1200)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rec = json.loads(proc.stdout)
    jsonschema.validate(rec, json.loads((ROOT / "schemas" / "best_rec.schema.json").read_text()))
    assert rec["baseline"]["trial_number"] == 0 and rec["baseline"]["params"] == {"train.optm_lr": pytest.approx(1e-5)}
    assert rec["trials"]["complete"] == 3 and rec["trials"]["trial_epochs"] == 3
    assert Path(rec["checkpoint_path"], "config.json").is_file()
    assert Path(rec["spec_path"]).is_file()
    study = tmp_path / "automl" / "base"
    rows = pq.read_table(study / "trials.parquet").to_pylist()
    assert [r["state"] for r in rows] == ["COMPLETE", "COMPLETE", "COMPLETE"]
    assert (study / "history.png").is_file()
    held = {r["number"]: _held(Path(r["trial_dir"])) for r in rows}
    assert [n for n, folders in held.items() if folders] == [rec["trial_number"]], held
    best_dir = Path(rows[rec["trial_number"]]["trial_dir"])
    step = Path(rec["checkpoint_path"]).name
    assert [Path(f).parts[-2:] for f in held[rec["trial_number"]]] == [("checkpoints", step), ("safetensors", step)]
    for row in rows:  # what every trial keeps
        trial_dir = Path(row["trial_dir"])
        assert (trial_dir / "spec.yaml").is_file() and (trial_dir / "train.log").is_file() and list((trial_dir / "train").glob("*/metrics.jsonl"))
        assert "accuracy" in json.loads(next((trial_dir / "eval").glob("step_*/metrics.json")).read_text())
    assert "keep best: removed the checkpoints of trial(s)" in proc.stderr and best_dir.is_dir()
    import optuna

    assert optuna.load_study(study_name="base", storage=f"sqlite:///{study / 'study.db'}").user_attrs["skillbank.keep"] == "best"
    refused = skillbank("automl", "--skill", SKILL, "--spec", str(base_spec), "--backend", "local", "--max-trials", "3", "--algorithm", "random",
                        "--param", "train.optm_lr", "--range", "train.optm_lr=1e-4:1e-3", "--keep", "all", timeout=300)
    assert refused.returncode == 2 and "keeps best checkpoints" in refused.stderr


def test_train_with_automl_policy_auto_hands_over_to_automl(base_spec, tmp_path):
    from skillbank.routing.router import route

    assert route(skill=SKILL, action="train").route == "automl"
    proc = skillbank("train", "--spec", str(base_spec), "--backend", "local", "--automl-max-trials", "1", timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "route: automl" in proc.stdout + proc.stderr
    assert (tmp_path / "automl" / "base" / "best_rec.json").is_file()


def test_a_pruned_trial_stops_training_before_its_last_epoch(base_spec, tmp_path, monkeypatch):
    """The real runner: pruned after epoch 1 of 3, the trainer is paused, then stopped; no later export appears
    and no process of the trial (torchrun's rank included) is left."""
    import os

    import yaml

    from skillbank import procs
    from skillbank.automl import trials
    from skillbank.runs import layout

    monkeypatch.setattr(trials, "POLL_S", 0.05)
    spec = yaml.safe_load(base_spec.read_text())
    spec["train"]["epoch"] = 3
    spec["train"]["train_batch_per_replica"] = spec["train"]["train_policy"]["mini_batch"] = 1  # 24 steps an epoch
    spec["train"]["output_dir"] = str(tmp_path / "trial" / "train")
    reports: list[tuple[int, float]] = []

    def report(epoch: int, value: float) -> bool:
        reports.append((epoch, value))
        return True  # the pruner's verdict after the first epoch

    runner = trials.make_runner(metric="accuracy", backend="local", maximize=True)
    outcome = runner(tmp_path / "trial", spec, report)
    assert outcome.pruned and outcome.epochs_run == 1 and [e for e, _ in reports] == [1]
    runs = layout.run_dirs(tmp_path / "trial" / "train")
    steps = [s for run in runs for s in layout.list_safetensors_steps(run)]
    assert len(steps) == 1, f"training went on after the prune: exports at steps {steps}"
    assert [" ".join(p.cmdline()) for p in procs.descendants(os.getpid()) if procs.alive(p)] == []


def test_sigterm_while_a_trial_is_paused_stops_every_process_of_it(base_spec, tmp_path):
    """A real local-backend trial, paused while its first epoch is evaluated (skillbank train, torchrun
    and the rank, which torchrun starts in a session of its own, all stopped): SIGTERM on `skillbank
    automl` leaves none of them behind, and the trial is FAIL (enqueued again for the next worker), not PRUNED."""
    import os
    import signal
    import subprocess
    import time

    import optuna
    import psutil
    import yaml

    from skillbank import procs

    spec = yaml.safe_load(base_spec.read_text())
    spec["train"]["epoch"] = 2
    base_spec.write_text(yaml.safe_dump(spec))
    study = subprocess.Popen([sys.executable, "-m", "skillbank.cli", "automl", "--skill", SKILL, "--spec", str(base_spec),
                              "--backend", "local", "--max-trials", "1", "--param", "train.optm_lr", "--algorithm", "random"],
                             cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    snapshot: list = []
    try:
        deadline = time.monotonic() + 300
        while not any(p.status() == psutil.STATUS_STOPPED for p in snapshot if procs.alive(p)):
            assert study.poll() is None, study.communicate()[0][-3000:]
            assert time.monotonic() < deadline, "the trial was never paused"
            time.sleep(0.05)
            snapshot = procs.descendants(study.pid)
        commands = [" ".join(p.cmdline()) for p in snapshot]
        assert any("skillbank.training.local.torchrun" in c for c in commands) and any("skillbank.training.local.worker" in c for c in commands)
        study.send_signal(signal.SIGTERM)
        out, _ = study.communicate(timeout=120)
        assert study.returncode == 128 + signal.SIGTERM, out[-3000:]
        assert [p.pid for p in snapshot if procs.alive(p)] == [], out[-3000:]
        # a stop reads as a stop: one line naming the trial and its retry, no traceback here or in the trial's log
        last = out.strip().splitlines()[-1]
        assert last.startswith("automl: this worker stopped (SIGTERM): trial #0 stopped and re-queued as #1") and "--resume" in last, out[-3000:]
        train_log = (tmp_path / "automl" / "base" / "trials" / "trial_0000" / "train.log").read_text()
        assert "Traceback" not in out and "Exception ignored" not in out and "Traceback" not in train_log, out[-3000:] + train_log[-3000:]
        trials = optuna.load_study(study_name="base", storage=f"sqlite:///{tmp_path / 'automl' / 'base' / 'study.db'}").get_trials()
        assert [t.state.name for t in trials] == ["FAIL", "WAITING"] and "SIGTERM" in trials[0].user_attrs["fail_reason"]
        assert trials[1].user_attrs["retry_of"] == 0  # enqueued again: another worker (or the next start) runs it
    finally:
        for p in snapshot:
            try:
                os.kill(p.pid, signal.SIGKILL)
            except OSError:
                pass
        study.kill()


def test_stop_study_on_a_real_worker_with_nothing_finished_ends_0_with_one_line(base_spec, tmp_path):
    """--stop-study while the first trial trains: the worker stops it (no process left) and ends 0 with one
    line naming the trial, not "run failed: no trial completed", and no traceback."""
    import subprocess

    from skillbank import procs

    study = subprocess.Popen([sys.executable, "-m", "skillbank.cli", "automl", "--skill", SKILL, "--spec", str(base_spec),
                              "--backend", "local", "--max-trials", "1", "--param", "train.optm_lr", "--algorithm", "random"],
                             cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    pid_file = tmp_path / "automl" / "base" / "trials" / "trial_0000" / procs.PID_FILE
    try:
        import time

        deadline = time.monotonic() + 300
        while not pid_file.is_file():
            assert study.poll() is None and time.monotonic() < deadline, study.communicate()[0][-3000:]
            time.sleep(0.2)
        tree = procs.descendants(study.pid)
        stop = skillbank("automl", "--spec", str(base_spec), "--stop-study", "--wait", "120")
        out, _ = study.communicate(timeout=180)
        assert study.returncode == 0 and "run failed" not in out and "Traceback" not in out, out[-3000:]
        assert out.strip().splitlines()[-1].startswith("automl: the study was stopped (--stop-study): trial(s) #0 of this worker stopped (FAIL)")
        assert stop.returncode == 0 and "trial(s) #0 stopped" in stop.stdout, stop.stdout + stop.stderr
        assert [p.pid for p in tree if procs.alive(p)] == []
    finally:
        study.kill()
