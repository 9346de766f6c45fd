"""One AutoML study: sampler + pruner + storage + objective, with a baseline trial and resume.

The objective is storage- and runner-agnostic: `runner(trial_dir, spec, report)` trains and
evaluates one spec, calling `report(epoch, value)` after each epoch (it returns True when the
pruner says stop). Everything Optuna-specific stays in this module.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from skillbank.automl.sampling import enqueue_values, suggest_all
from skillbank.automl.space import SearchSpace
from skillbank.errors import InputError
from skillbank.spec.overrides import get_dotted, set_dotted

ALGORITHMS = ("bayesian", "random", "hyperband", "asha")
HEARTBEAT_S, GRACE_S = 2, 6  # a killed worker's trial is recognised as stale after GRACE_S


@dataclass
class TrialOutcome:
    value: float | None
    epochs_run: int
    checkpoint: str | None = None
    pruned: bool = False
    history: list[tuple[int, float]] = field(default_factory=list)


Runner = Callable[[Path, dict[str, Any], Callable[[int, float], bool]], TrialOutcome]
Check = Callable[[Path, dict[str, Any]], str | None]  # returns why a spec cannot run, or None


@dataclass
class StudySettings:
    study_name: str
    storage: str
    algorithm: str = "bayesian"
    max_trials: int = 8
    direction: str = "maximize"
    seed: int = 0
    workers: int = 1
    resume: bool = False
    max_epochs: int = 3
    baseline: bool = True


def make_sampler(settings: StudySettings):
    import optuna

    if settings.algorithm == "random":
        return optuna.samplers.RandomSampler(seed=settings.seed)
    return optuna.samplers.TPESampler(seed=settings.seed, n_startup_trials=3)


def make_pruner(settings: StudySettings):
    import optuna

    if settings.algorithm == "hyperband":
        return optuna.pruners.HyperbandPruner(min_resource=1, max_resource=settings.max_epochs, reduction_factor=3)
    if settings.algorithm == "asha":
        return optuna.pruners.SuccessiveHalvingPruner(min_resource=1, reduction_factor=3)
    return optuna.pruners.NopPruner()


def open_study(settings: StudySettings):
    """Create the study, or load it with --resume (stale RUNNING trials of a killed run are failed)."""
    import warnings

    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    storage = _storage(settings.storage)
    exists = settings.study_name in {s.study_name for s in optuna.get_all_study_summaries(storage)}
    if exists and not settings.resume:
        raise InputError(f"study {settings.study_name!r} already exists in {settings.storage}", where="--study",
                         fix="pass --resume to continue it, or another --study name")
    study = optuna.create_study(study_name=settings.study_name, storage=storage, load_if_exists=True,
                                direction=settings.direction, sampler=make_sampler(settings), pruner=make_pruner(settings))
    if exists:
        _fail_orphans(study)
    return study


def _storage(url: str, attempts: int = 6):
    """RDB storage with heartbeats; retried because workers starting together race to create the tables."""
    import time

    import optuna
    import sqlalchemy.exc

    for attempt in range(attempts):
        try:
            return optuna.storages.RDBStorage(
                url,
                heartbeat_interval=HEARTBEAT_S,
                grace_period=GRACE_S,
                engine_kwargs={"connect_args": {"timeout": 60}} if url.startswith("sqlite") else {},
            )
        except (sqlalchemy.exc.OperationalError, sqlalchemy.exc.IntegrityError):
            if attempt == attempts - 1:
                raise
            time.sleep(0.3 * (attempt + 1))
    raise AssertionError("unreachable")


def _fail_orphans(study) -> None:
    """Trials left RUNNING by a killed process (no heartbeat for GRACE_S) are marked failed, so they
    neither block the study nor count as finished; live workers' trials keep beating and stay."""
    import optuna

    optuna.storages.fail_stale_trials(study)


def finished_count(study) -> int:
    import optuna

    states = (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED)
    return len(study.get_trials(deepcopy=False, states=states))


def objective_for(space: SearchSpace, base_spec: dict[str, Any], trials_dir: Path, runner: Runner,
                  check: Check | None = None):
    import optuna

    def objective(trial: optuna.Trial) -> float:
        values = suggest_all(trial, space)
        spec = copy.deepcopy(base_spec)
        for key, value in values.items():
            set_dotted(spec, key, value)
        trial_dir = trials_dir / f"trial_{trial.number:04d}"
        set_dotted(spec, "train.output_dir", str(trial_dir / "train"))
        set_dotted(spec, "results_dir", str(trial_dir))
        trial.set_user_attr("values", values)
        trial.set_user_attr("trial_dir", str(trial_dir))
        if check is not None:
            why = check(trial_dir, spec)
            if why:
                trial.set_user_attr("pruned_reason", why)
                trial.set_user_attr("epochs_run", 0)
                raise optuna.TrialPruned(why)

        def report(epoch: int, value: float) -> bool:
            trial.report(value, step=epoch)
            return trial.should_prune()

        outcome = runner(trial_dir, spec, report)
        trial.set_user_attr("epochs_run", outcome.epochs_run)
        trial.set_user_attr("checkpoint", outcome.checkpoint)
        trial.set_user_attr("history", outcome.history)
        if outcome.pruned:
            trial.set_user_attr("pruned_reason", f"pruned by {type(trial.study.pruner).__name__} after epoch {outcome.epochs_run}")
            raise optuna.TrialPruned()
        if outcome.value is None:
            raise optuna.TrialPruned("the trial produced no metric")
        return outcome.value

    return objective


def run_study(settings: StudySettings, space: SearchSpace, base_spec: dict[str, Any], trials_dir: Path,
              runner: Runner, check: Check | None = None, progress: Callable[[Any], None] | None = None):
    import optuna

    study = open_study(settings)
    if settings.baseline and not study.get_trials(deepcopy=False):
        base_values = {p.key: get_dotted(base_spec, p.key) for p in space.params}
        study.enqueue_trial(enqueue_values(space, base_values), user_attrs={"baseline": True}, skip_if_exists=True)
    remaining = settings.max_trials - finished_count(study)
    if remaining > 0:
        cap = optuna.study.MaxTrialsCallback(settings.max_trials, states=(optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED))
        callbacks = [cap] + ([lambda s, t: progress(t)] if progress else [])
        study.optimize(objective_for(space, base_spec, trials_dir, runner, check), n_trials=remaining,
                       n_jobs=settings.workers, callbacks=callbacks, catch=(RuntimeError, OSError))
    return study
