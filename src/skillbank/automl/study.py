"""One AutoML study: sampler + pruner + storage + objective, with a baseline trial and resume.

The objective is storage- and runner-agnostic: `runner(trial_dir, spec, report)` trains and
evaluates one spec, calling `report(epoch, value)` after each epoch (it returns True when the
pruner says stop). Everything Optuna-specific stays in this module.

A trial ends COMPLETE, PRUNED (the recommendation cannot run for a spec reason, or the pruner
stopped it: final) or FAIL (an environment reason, a crash, a stop: `--resume` runs its parameters
again, the baseline's included). Only COMPLETE and PRUNED count toward max_trials.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from skillbank.automl import DEFAULT_TRIALS
from skillbank.automl.sampling import enqueue_values, suggest_all
from skillbank.automl.space import SearchSpace
from skillbank.errors import InputError
from skillbank.spec.overrides import get_dotted, set_dotted

HEARTBEAT_S, GRACE_S = 2, 6  # a killed worker's trial is recognised as stale after GRACE_S


@dataclass
class TrialOutcome:
    value: float | None
    epochs_run: int
    checkpoint: str | None = None
    pruned: bool = False
    history: list[tuple[int, float]] = field(default_factory=list)


class TrialFailed(RuntimeError):
    """The trial could not run for a reason outside its spec (the environment, a crash): FAIL, run again on --resume."""


Runner = Callable[[Path, dict[str, Any], Callable[[int, float], bool]], TrialOutcome]
Apply = Callable[[dict[str, Any], dict[str, Any]], Any]  # puts the sampled values into the spec; InputError: PRUNED
Check = Callable[[Path, dict[str, Any]], str | None]  # why the spec cannot run (PRUNED), or None; raises TrialFailed


@dataclass
class StudySettings:
    study_name: str
    storage: str
    algorithm: str = "bayesian"
    max_trials: int = DEFAULT_TRIALS
    direction: str = "maximize"
    seed: int = 0
    workers: int = 1
    resume: bool = False
    max_epochs: int = 3
    baseline: bool = True


def make_sampler(settings: StudySettings):
    import optuna

    if settings.algorithm in ("random", "grid"):  # grid: every point is enqueued (enqueue_grid), the sampler never asked
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


def unretried_failures(study) -> list[Any]:
    """Failed trials that no later trial retries (what --resume runs again)."""
    trials = study.get_trials(deepcopy=False)
    retried = {t.user_attrs.get("retry_of") for t in trials}
    return [t for t in trials if t.state.name == "FAIL" and t.number not in retried]


def requeue_failed(study) -> list[int]:
    """Enqueue the parameters of every unretried failed trial (a failed baseline is enqueued as the
    baseline again); returns the numbers of the failed trials retried."""
    requeued = []
    for t in unretried_failures(study):
        attrs = {"retry_of": t.number, **({"baseline": True} if t.user_attrs.get("baseline") else {})}
        study.enqueue_trial(t.params, user_attrs=attrs)
        requeued.append(t.number)
    return requeued


def _set_all(spec: dict[str, Any], values: dict[str, Any]) -> None:
    for key, value in values.items():
        set_dotted(spec, key, value)


def objective_for(space: SearchSpace, base_spec: dict[str, Any], trials_dir: Path, runner: Runner,
                  check: Check | None = None, apply: Apply = _set_all):
    import optuna

    def objective(trial: optuna.Trial) -> float:
        values = suggest_all(trial, space)
        spec = copy.deepcopy(base_spec)
        trial_dir = trials_dir / f"trial_{trial.number:04d}"
        if "train" in spec:  # a train spec's trial trains into its own folder
            set_dotted(spec, "train.output_dir", str(trial_dir / "train"))
        set_dotted(spec, "results_dir", str(trial_dir))
        trial.set_user_attr("values", values)
        trial.set_user_attr("trial_dir", str(trial_dir))
        trial.set_user_attr("epochs_run", 0)
        try:
            try:
                apply(spec, values)
            except InputError as exc:
                why = f"invalid spec: {exc.where + ': ' if exc.where else ''}{exc.message}"
                trial.set_user_attr("pruned_reason", why)
                raise optuna.TrialPruned(why) from None
            trial.set_user_attr("values", values)  # as applied (apply may type them)
            why = check(trial_dir, spec) if check is not None else None
            if why:
                trial.set_user_attr("pruned_reason", why)
                raise optuna.TrialPruned(why)

            def report(epoch: int, value: float) -> bool:
                trial.report(value, step=epoch)
                return trial.should_prune()

            outcome = runner(trial_dir, spec, report)
        except optuna.TrialPruned:
            raise
        except BaseException as exc:  # FAIL (a stop included): say why in trials.parquet
            trial.set_user_attr("fail_reason", _reason(exc))
            raise
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


def _reason(exc: BaseException) -> str:
    if isinstance(exc, KeyboardInterrupt):
        return f"stopped ({exc or 'SIGINT'}) while running"
    return str(exc) or type(exc).__name__


def grid_points(space: SearchSpace) -> list[dict[str, Any]]:
    """Every combination of a space of choices (algorithm grid), in the order the choices were given."""
    import itertools

    bad = [p.key for p in space.params if p.kind not in ("categorical", "bool") or (p.weights and len(set(p.weights)) > 1)]
    if bad:
        raise InputError(f"the grid searches lists of choices; {', '.join(bad)} is a range", where="--algorithm grid",
                         fix=f"give {bad[0]} as --choices {bad[0]}=A,B,... or use --algorithm bayesian / random")
    return [dict(zip(space.keys(), combo)) for combo in itertools.product(*(p.choices for p in space.params))]


def run_study(settings: StudySettings, space: SearchSpace, base_spec: dict[str, Any], trials_dir: Path,
              runner: Runner, check: Check | None = None, progress: Callable[[Any], None] | None = None,
              apply: Apply = _set_all):
    import optuna

    study = open_study(settings)
    if not study.get_trials(deepcopy=False):
        if settings.baseline:
            base_values = {p.key: get_dotted(base_spec, p.key) for p in space.params}
            study.enqueue_trial(enqueue_values(space, base_values), user_attrs={"baseline": True}, skip_if_exists=True)
        if settings.algorithm == "grid":  # the points not run yet stay WAITING in storage: --resume runs them
            for point in grid_points(space):
                study.enqueue_trial(point, skip_if_exists=True)
    elif settings.resume:
        requeue_failed(study)
    remaining = settings.max_trials - finished_count(study)
    if settings.algorithm == "grid":  # a grid ends with its points (a run past them would sample at random)
        remaining = min(remaining, len(study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.WAITING,))))
    if remaining > 0:
        cap = optuna.study.MaxTrialsCallback(settings.max_trials, states=(optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED))
        callbacks = [cap] + ([lambda s, t: progress(t)] if progress else [])
        study.optimize(objective_for(space, base_spec, trials_dir, runner, check, apply), n_trials=remaining,
                       n_jobs=settings.workers, callbacks=callbacks, catch=(RuntimeError, OSError))
    return study
