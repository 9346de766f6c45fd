"""One real trial: validate + preflight the recommended spec, train it, evaluate each epoch's checkpoint.

Training runs as `skillbank train --automl-policy off` in a subprocess. When an epoch's
`safetensors/step_N` export appears, the trainer's whole process tree (skillbank train, torchrun
and its ranks, or the cosmos-rl launcher and its workers: skillbank.procs) is paused while that
export is evaluated on the spec's validation set and the metric reported to the pruner; then it
continues or, when pruned, is stopped. Pausing is what makes pruning save epochs: without it a
fast trainer finishes every epoch before the first evaluation is done.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from skillbank import procs
from skillbank.automl.study import TrialFailed, TrialOutcome
from skillbank.errors import InputError
from skillbank.runs.disk import TRIAL_CKPT  # every trial saves and exports each epoch, keeping all (runs.disk sizes the study's disk)
from skillbank.specification.io import write_spec

POLL_S = 0.5
LOSS_METRICS = ("val_loss", "loss")  # read from the trainer's metrics.jsonl; any other metric from evaluating the export


def trial_spec(spec: dict[str, Any]) -> dict[str, Any]:
    """The spec a trial trains (checked and run alike): the base spec's values with TRIAL_CKPT."""
    spec["train"]["ckpt"].update(TRIAL_CKPT)
    return spec


def fit_trial(model: Any, spec: dict[str, Any], searched: Any = ()) -> list[Any]:
    """The trial's batches fitted to its data in place (skillbank.runs.fitting): the base spec's
    values are ceilings, a searched key is kept as sampled (preflight prunes it when it cannot run).
    Data that cannot be counted leaves the spec as it is (preflight says why)."""
    from skillbank.specification.overrides import set_dotted
    from skillbank.runs import fitting

    try:
        _, fits = fitting.fit_to_data(model, fixed=set(searched))
    except InputError:
        return []
    for fit in fits:
        set_dotted(spec, fit.key, fit.after)
    return fits


def make_check(skill: str, backend: str | None = None, searched: Any = ()) -> Callable[[Path, dict[str, Any]], str | None]:
    """Validate and preflight one recommendation: a spec reason prunes it (returned), an environment
    reason (only env.* errors: token, redis-server, GPUs, disk, model) fails it (TrialFailed), so that
    --resume runs it again."""

    def check(trial_dir: Path, spec: dict[str, Any]) -> str | None:
        from skillbank.preflight.run import run_preflight
        from skillbank.specification.registry import spec_model
        from skillbank.specification.validation import validate

        spec = trial_spec(spec)
        try:
            model = validate(spec_model(skill, "train"), spec, source="recommendation")
        except InputError as exc:
            return f"invalid spec: {exc.message}"
        fits = fit_trial(model, spec, searched)
        if fits:
            print(f"automl: {trial_dir.name}: fitted " + "; ".join(f.line() for f in fits), file=sys.stderr)
        trial_dir.mkdir(parents=True, exist_ok=True)
        write_spec(trial_dir / "spec.yaml", spec)
        report = run_preflight(skill=skill, action="train", spec_path=trial_dir / "spec.yaml", backend=backend, runs_on="here")
        errors = report.errors
        spec_errors = [f"{f.check}: {f.message}" for f in errors if f.group != "env"]
        if spec_errors:
            return "preflight failed: " + "; ".join(spec_errors[:3])
        if errors:
            raise TrialFailed("preflight (environment) failed: " + "; ".join(f"{f.check}: {f.message}" for f in errors[:3]))
        return None

    return check


def _exports(output_dir: Path) -> list[tuple[int, Path]]:
    """Whole HF exports of the trial's run, in step order (the training layout decides what is whole)."""
    from skillbank.runs import layout

    return [(step, layout.safetensors_dir(run, step)) for run in layout.run_dirs(output_dir)
            for step in layout.list_safetensors_steps(run)]


def _val_losses(output_dir: Path) -> list[float]:
    from skillbank.runs import layout

    return [float(row["val_loss"]) for run in layout.run_dirs(output_dir) for row in layout.read_metrics(run)
            if row.get("val_loss") is not None]


def evaluate_checkpoint(step_dir: Path, results_dir: Path, metric: str) -> float:
    """Evaluate one export in this process (torch is imported once per study, not per checkpoint), on
    the run's validation set (its training set when it has none) with the vision settings it trained with."""
    from skillbank.evaluation.evaluate import evaluate, spec_from_run

    procs.raise_if_stopped()  # a safe point: the first evaluation's imports take long, a stop meanwhile ends here
    run_dir = step_dir.parent.parent  # <run>/safetensors/step_N
    spec = spec_from_run(run_dir, results_dir=results_dir, primary=metric, train_if_no_val=True)
    return evaluate(spec, model_name=str(step_dir), progress=False)["primary_metric"]["value"]


def make_runner(*, metric: str, backend: str, maximize: bool, threads: int | None = None):
    """`threads`: OMP_NUM_THREADS of each trainer when the environment sets none (trials running at once
    on one machine share its cores: OpenMP pools spinning against each other slow every trial manyfold)."""
    env = {**os.environ, "OMP_NUM_THREADS": str(threads)} if threads and "OMP_NUM_THREADS" not in os.environ else None

    def runner(trial_dir: Path, spec: dict[str, Any], report: Callable[[int, float], bool]) -> TrialOutcome:
        trial_dir.mkdir(parents=True, exist_ok=True)
        spec = trial_spec(spec)
        spec_path = trial_dir / "spec.yaml"
        write_spec(spec_path, spec)
        output_dir = Path(spec["train"]["output_dir"])
        argv = [sys.executable, "-m", "skillbank.cli", "train", "--spec", str(spec_path), "--automl-policy", "off", "--backend", backend]
        history: list[tuple[int, float]] = []
        best: tuple[float, str | None] | None = None

        def new_points() -> list[tuple[int, Path | None, float | None]]:
            """(epoch, checkpoint, value-if-known) for each epoch finished since the last look."""
            if metric in LOSS_METRICS:
                return [(i + 1, None, v) for i, v in enumerate(_val_losses(output_dir)) if i >= len(history)]
            return [(i + 1, d, None) for i, (_, d) in enumerate(_exports(output_dir)) if i >= len(history)]

        with open(trial_dir / "train.log", "w", encoding="utf-8") as log:
            proc = procs.start(argv, pid_file=trial_dir / procs.PID_FILE, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
            paused: list[Any] = []  # the tree as it was paused (a stop reaches those even if they left it)
            try:
                while True:
                    if procs.STOPPING.is_set():
                        raise TrialFailed(procs.stop_reason() or procs.SIGNALLED)
                    finished = proc.poll() is not None
                    points = new_points()
                    if points and not finished:
                        paused = procs.pause(proc.pid)
                    for epoch, step_dir, value in points:
                        if value is None:
                            value = evaluate_checkpoint(step_dir, trial_dir / "eval" / step_dir.name, metric)
                        history.append((epoch, value))
                        if best is None or (value > best[0] if maximize else value < best[0]):
                            best = (value, str(step_dir) if step_dir else None)
                        if report(epoch, value):
                            procs.stop(proc.pid, also=paused)
                            proc.wait()
                            trained = points[-1][0]  # epochs the trainer finished, evaluated or not
                            return TrialOutcome(best[0], trained, best[1], pruned=True, history=history)
                    if points and not finished:
                        procs.resume(proc.pid)
                        paused = []
                    if finished:
                        break
                    time.sleep(POLL_S)
            finally:
                if proc.poll() is None:
                    procs.stop(proc.pid, also=paused)
                    proc.wait()
        if proc.returncode != 0:
            raise TrialFailed(f"training failed (exit {proc.returncode}); see {trial_dir / 'train.log'}")
        return TrialOutcome(best[0] if best else None, len(history), best[1] if best else None, history=history)

    return runner
