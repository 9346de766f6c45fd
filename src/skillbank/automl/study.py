"""One AutoML study: sampler + pruner + storage + objective, with a baseline trial and resume.

The objective is storage- and runner-agnostic: `runner(trial_dir, spec, report)` trains and
evaluates one spec, calling `report(epoch, value)` after each epoch (it returns True when the
pruner says stop). Everything Optuna-specific stays in this module.

A trial ends COMPLETE, PRUNED (the recommendation cannot run for a spec reason, or the pruner
stopped it: final) or FAIL (an environment reason, a crash, a stop: `--resume` runs its parameters
again, the baseline's included). Only COMPLETE and PRUNED count toward max_trials.

Many workers, one study: any number of processes, on any number of machines, run the same command
on one storage. The worker that creates the study enqueues the baseline (so it runs once); the
others join it (the study's search must match: `skillbank.search` in its user attributes). Each
trial's sample is seeded by the study seed and the trial's number, never by the process, so no two
workers draw the same parameters. A worker that dies without a word (SIGKILL, a lost node) stops
beating: after GRACE_S another worker fails its trial and runs it again once (Optuna's heartbeat and
RetryHeartbeatStaleTrialCallback). A worker told to stop (SIGTERM / SIGINT) stops only its own
trials (FAIL, enqueued again for the others); `request_stop` (skillbank automl --stop-study) stops
every worker of the study.
"""

from __future__ import annotations

import copy
import functools
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from skillbank.automl import DEFAULT_TRIALS
from skillbank.automl.sampling import enqueue_values, suggest_all
from skillbank.automl.space import SearchSpace
from skillbank.errors import InputError
from skillbank.specification.overrides import get_dotted, set_dotted

HEARTBEAT_S, GRACE_S = 2, 10  # a killed worker's trial is recognised as stale after GRACE_S
STOP_ATTR, SEARCH_ATTR = "stop_requested", "skillbank.search"  # study user attributes
STOP_POLL_S = 3.0  # how often a worker looks for a study-level stop


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
    search: dict[str, Any] = field(default_factory=dict)  # what a joining worker must search alike (SEARCH_ATTR)


def make_sampler(settings: StudySettings):
    """The study's sampler, seeded per trial (TrialSeeded): the same trial number draws the same values
    in whichever process runs it, and two trials never share a seed."""
    import optuna

    if settings.algorithm in ("random", "grid"):  # grid: every point is enqueued (enqueue_grid), the sampler never asked
        return _trial_seeded_class()(lambda seed: optuna.samplers.RandomSampler(seed=seed), settings.seed)
    # constant_liar: trials still running elsewhere count as bad, so concurrent workers spread out
    return _trial_seeded_class()(lambda seed: optuna.samplers.TPESampler(seed=seed, n_startup_trials=3, constant_liar=True), settings.seed)


def trial_seed(seed: int, number: int) -> int:
    return (seed * 1_000_003 + number) % 2**32


@functools.cache
def _trial_seeded_class() -> type:
    """TrialSeeded, built on first use (optuna is not imported with this module)."""
    import optuna

    class TrialSeeded(optuna.samplers.BaseSampler):
        """A sampler made afresh for each trial, seeded by (study seed, trial number): TPE and random
        sampling keep no state between trials but their random generator, which a process-wide seed would
        repeat in every worker (the duplicate parameters of two workers on one study)."""

        def __init__(self, make: Callable[[int], Any], seed: int):
            self._make, self._seed = make, seed
            self._samplers: dict[int, Any] = {}
            self._lock = threading.Lock()

        def _for(self, trial: Any) -> Any:
            with self._lock:
                if trial.number not in self._samplers:
                    self._samplers[trial.number] = self._make(trial_seed(self._seed, trial.number))
                return self._samplers[trial.number]

        def infer_relative_search_space(self, study: Any, trial: Any) -> dict[str, Any]:
            return self._for(trial).infer_relative_search_space(study, trial)

        def sample_relative(self, study: Any, trial: Any, search_space: dict[str, Any]) -> dict[str, Any]:
            return self._for(trial).sample_relative(study, trial, search_space)

        def sample_independent(self, study: Any, trial: Any, param_name: str, param_distribution: Any) -> Any:
            return self._for(trial).sample_independent(study, trial, param_name, param_distribution)

        def before_trial(self, study: Any, trial: Any) -> None:
            self._for(trial).before_trial(study, trial)

        def after_trial(self, study: Any, trial: Any, state: Any, values: Any) -> None:
            with self._lock:
                sampler = self._samplers.pop(trial.number, None)
            if sampler is not None:
                sampler.after_trial(study, trial, state, values)

        def reseed_rng(self) -> None:  # each trial is seeded by its number already
            pass

    return TrialSeeded


def make_pruner(settings: StudySettings):
    import optuna

    if settings.algorithm == "hyperband":
        return optuna.pruners.HyperbandPruner(min_resource=1, max_resource=settings.max_epochs, reduction_factor=3)
    if settings.algorithm == "asha":
        return optuna.pruners.SuccessiveHalvingPruner(min_resource=1, reduction_factor=3)
    return optuna.pruners.NopPruner()


def open_study(settings: StudySettings) -> tuple[Any, bool]:
    """Create the study (returns created=True: this worker enqueues the baseline), or join it: the same
    search, not stopped (--resume lifts a study-level stop); stale RUNNING trials of killed workers are
    failed (and retried once)."""
    import warnings

    import optuna

    from skillbank.redaction import redact

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    storage = _storage(settings.storage)
    kwargs = dict(study_name=settings.study_name, storage=storage, sampler=make_sampler(settings), pruner=make_pruner(settings))
    try:
        study = optuna.create_study(direction=settings.direction, **kwargs)
        study.set_user_attr(SEARCH_ATTR, settings.search)
        return study, True
    except optuna.exceptions.DuplicatedStudyError:
        study = optuna.load_study(**kwargs)
    theirs = study.user_attrs.get(SEARCH_ATTR)
    if theirs and settings.search and theirs != settings.search:
        differ = sorted(k for k in {*theirs, *settings.search} if theirs.get(k) != settings.search.get(k))
        raise InputError(f"study {settings.study_name!r} in {redact(settings.storage)} searches differently ({', '.join(differ)})",
                         where="--study", fix="join it with its own spec and flags, or pass another --study name")
    if study.direction.name.lower() != settings.direction:
        raise InputError(f"study {settings.study_name!r} {study.direction.name.lower()}s its metric", where="--direction",
                         fix="join it with its own --metric / --direction, or pass another --study name")
    if study.user_attrs.get(STOP_ATTR):
        if not settings.resume:
            raise InputError(f"study {settings.study_name!r} was stopped (skillbank automl --stop-study)", where="--study",
                             fix="pass --resume to continue it")
        study.set_user_attr(STOP_ATTR, False)
    _fail_orphans(study)
    return study, False


def request_stop(storage_url: str, study_name: str) -> int:
    """Stop every worker of a study (each fails its running trials and exits); returns the trials that
    were running. --resume continues the study."""
    import optuna

    study = optuna.load_study(study_name=study_name, storage=_storage(storage_url))
    study.set_user_attr(STOP_ATTR, True)
    return len(study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,)))


def stop_requested(study) -> bool:
    return bool(study.user_attrs.get(STOP_ATTR))  # read from the storage each time


def _storage(url: str, attempts: int = 6):
    """RDB storage with heartbeats; retried because workers starting together race to create the tables."""
    import time

    import optuna
    import sqlalchemy.exc

    from skillbank.automl.storage import check_url

    check_url(url)
    for attempt in range(attempts):
        try:
            return optuna.storages.RDBStorage(
                url,
                heartbeat_interval=HEARTBEAT_S,
                grace_period=GRACE_S,
                heartbeat_stale_trial_callback=retry_stale_once,
                engine_kwargs={"connect_args": {"timeout": 60}} if url.startswith("sqlite") else {"pool_pre_ping": True},
            )
        except (sqlalchemy.exc.OperationalError, sqlalchemy.exc.IntegrityError):
            if attempt == attempts - 1:
                raise
            time.sleep(0.3 * (attempt + 1))
    raise AssertionError("unreachable")


def retry_stale_once(study, trial) -> None:
    """Optuna's RetryHeartbeatStaleTrialCallback(max_retry=1) on a dead worker's trial, with each
    distribution widened to hold the trial's value: the baseline's value may lie outside a narrowed
    --range, which the callback's create_trial would refuse (and crash the worker that found it)."""
    import optuna

    trial = copy.copy(trial)
    trial.distributions = {name: _holding(dist, trial.params.get(name)) for name, dist in trial.distributions.items()}
    optuna.storages.RetryHeartbeatStaleTrialCallback(max_retry=1)(study, trial)


def _holding(dist: Any, value: Any) -> Any:
    import optuna.distributions as d

    if value is None:
        return dist
    if isinstance(dist, d.CategoricalDistribution):
        return dist if value in dist.choices else d.CategoricalDistribution([*dist.choices, value])
    if isinstance(dist, (d.FloatDistribution, d.IntDistribution)) and not dist.low <= value <= dist.high:
        kind = type(dist)
        return kind(low=min(dist.low, value), high=max(dist.high, value), log=dist.log,
                    **({"step": dist.step} if dist.step is not None and isinstance(dist, d.IntDistribution) and not dist.log else {}))
    return dist


def _fail_orphans(study) -> None:
    """Trials left RUNNING by a killed process (no heartbeat for GRACE_S) are marked failed (and enqueued
    again once, by the storage's callback), so they neither block the study nor count as finished; live
    workers' trials keep beating and stay."""
    import optuna

    optuna.storages.fail_stale_trials(study)


def finished_count(study) -> int:
    import optuna

    states = (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED)
    return len(study.get_trials(deepcopy=False, states=states))


def retry_of(trial: Any) -> int | None:
    """The trial this one runs again: a --resume or a stopped worker's retry (user attr retry_of) or
    the heartbeat's retry of a dead worker's trial (system attr failed_trial)."""
    number = trial.user_attrs.get("retry_of")
    return number if number is not None else trial.system_attrs.get("failed_trial")


def unretried_failures(study) -> list[Any]:
    """Failed trials that no later trial retries (what --resume runs again)."""
    trials = study.get_trials(deepcopy=False)
    retried = {retry_of(t) for t in trials} | {n for t in trials for n in t.system_attrs.get("retry_history", [])}
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
            if _worker_stopped(exc):  # this worker alone was stopped: another worker (or --resume) runs it again
                attrs = {"retry_of": trial.number, **({"baseline": True} if trial.user_attrs.get("baseline") else {})}
                trial.study.enqueue_trial(trial.params, user_attrs=attrs)
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


def _worker_stopped(exc: BaseException) -> bool:
    """SIGTERM / SIGINT on this worker (not a study-level stop, not a crash)."""
    from skillbank import procs

    return isinstance(exc, KeyboardInterrupt) or (procs.STOPPING.is_set() and procs.stop_reason() == procs.SIGNALLED)


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

    study, created = open_study(settings)
    if created:
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
        callbacks = [cap, _stop_when_told] + ([lambda s, t: progress(t)] if progress else [])
        with _watch_study_stop(study):
            study.optimize(objective_for(space, base_spec, trials_dir, runner, check, apply), n_trials=remaining,
                           n_jobs=settings.workers, callbacks=callbacks, catch=(RuntimeError, OSError))
    return study


def _stop_when_told(study, _trial) -> None:
    """After a trial: a stopped worker (or study) starts no new trial in any of its threads."""
    from skillbank import procs

    if procs.STOPPING.is_set():
        study.stop()


@contextmanager
def _watch_study_stop(study) -> Iterator[None]:
    """While this worker runs trials, a thread polls the storage for a study-level stop and, when it
    comes, tells this worker's trials to stop (procs.request_stop: their runners fail them)."""
    from skillbank import procs

    done = threading.Event()

    def poll() -> None:
        while not done.wait(STOP_POLL_S):
            try:
                if stop_requested(study):
                    procs.request_stop(procs.STUDY_STOPPED)
                    return
            except Exception:  # noqa: BLE001 - a storage hiccup: look again at the next poll
                continue

    thread = threading.Thread(target=poll, name="automl-stop-watch", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
