"""One AutoML study: sampler + pruner + storage, its creation or joining, resume, and stops.

The objective is storage- and runner-agnostic: `runner(trial_dir, spec, report)` trains and
evaluates one spec, calling `report(epoch, value)` after each epoch (it returns True when the
pruner says stop). Everything Optuna-specific stays in this module and in `worker` (the trial loop, and `run_study`: create or join, then run trials).

A trial ends COMPLETE, PRUNED (the recommendation cannot run for a spec reason, or the pruner
stopped it: final) or FAIL (an environment reason, a crash, a stop: `--resume` runs its parameters
again, the baseline's included). Only COMPLETE and PRUNED count toward max_trials.

Many workers, one study: any number of processes, on any number of machines, run the same command
on one storage. What must happen once per study happens under the study's lock (`lock`: the
storage's own): the worker that creates the study enqueues the baseline (so it runs once); the
others join it (the study's search must match, `skillbank.search`, and its base spec too,
`skillbank.base_spec`, unless --allow-spec-change); --resume re-enqueues each failed trial once.
Each trial's sample is seeded by the study seed and the trial's number, never by the process, so no
two workers draw the same parameters. A worker that dies without a word (SIGKILL, a lost node) stops
beating: after GRACE_S another worker fails its trial and runs it again once (Optuna's heartbeat and
RetryHeartbeatStaleTrialCallback). A worker told to stop (SIGTERM / SIGINT) stops only its own
trials (FAIL, enqueued again for the others); `request_stop` (skillbank automl --stop-study) stops
every worker of the study.
"""

from __future__ import annotations

import copy
import functools
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from skillbank.automl import DEFAULT_TRIALS
from skillbank.automl.keep import KEEP_ATTR, check_keep, recorded_keep
from skillbank.automl.space import SearchSpace
from skillbank.errors import InputError

HEARTBEAT_S, GRACE_S = 2, 10  # a killed worker's trial is recognised as stale after GRACE_S
STOP_ATTR, SEARCH_ATTR = "stop_requested", "skillbank.search"  # study user attributes
SPEC_ATTR, SPEC_DIGEST_ATTR, TRIALS_ATTR = "skillbank.base_spec", "skillbank.base_spec_sha256", "skillbank.max_trials"
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
    base_spec: dict[str, Any] = field(default_factory=dict)  # fingerprint.normalized(base spec): what it must train alike (SPEC_ATTR)
    allow_spec_change: bool = False  # join a study whose base spec differs (its trials are then not comparable)
    keep: str | None = None  # --keep best|all (automl.keep); None: the study's recorded rule, a new study's "best"


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


def _quiet(optuna: Any) -> None:
    """Optuna's warnings about what this module does on purpose (the heartbeat is experimental, and
    beats outside study.optimize here: automl.worker; the baseline may lie outside a narrowed --range)
    say nothing to a user."""
    import warnings

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    warnings.filterwarnings("ignore", message="Heartbeat of storage is supposed to be used with Study.optimize")
    warnings.filterwarnings("ignore", message="Fixed parameter .* is out of range")  # the baseline outside a narrowed --range: on purpose


def open_study(settings: StudySettings, storage: Any = None) -> tuple[Any, bool]:
    """Create the study (returns created=True: the caller enqueues the baseline, under the study's lock),
    or join it: the same search and base spec (fingerprint), not stopped (--resume lifts a study-level
    stop)."""
    import optuna

    from skillbank.automl import fingerprint
    from skillbank.redaction import redact

    _quiet(optuna)
    storage = storage if storage is not None else _storage(settings.storage)
    kwargs = dict(study_name=settings.study_name, storage=storage, sampler=make_sampler(settings), pruner=make_pruner(settings))
    try:
        study = optuna.create_study(direction=settings.direction, **kwargs)
        study.set_user_attr(SEARCH_ATTR, settings.search)
        if settings.base_spec:
            study.set_user_attr(SPEC_ATTR, settings.base_spec)
            study.set_user_attr(SPEC_DIGEST_ATTR, fingerprint.digest(settings.base_spec))
        study.set_user_attr(TRIALS_ATTR, settings.max_trials)
        settings.keep = check_keep(settings.keep)
        study.set_user_attr(KEEP_ATTR, settings.keep)
        return study, True
    except optuna.exceptions.DuplicatedStudyError:
        study = optuna.load_study(**kwargs)
    where = f"study {settings.study_name!r} in {redact(settings.storage)}"
    attrs = study.user_attrs
    theirs = attrs.get(SEARCH_ATTR)
    if theirs and settings.search and theirs != settings.search:
        differ = sorted(k for k in {*theirs, *settings.search} if theirs.get(k) != settings.search.get(k))
        raise InputError(f"{where} searches differently ({', '.join(differ)})",
                         where="--study", fix="join it with its own spec and flags, or pass another --study name")
    stored = attrs.get(SPEC_ATTR)
    if stored and settings.base_spec and attrs.get(SPEC_DIGEST_ATTR) != fingerprint.digest(settings.base_spec):
        diffs = fingerprint.differences(stored, settings.base_spec)
        if not settings.allow_spec_change:
            raise InputError(f"{where} was started from another base spec, its trials would not compare with this worker's: "
                             f"{fingerprint.describe(diffs)}", where="--spec",
                             fix="join with the study's own base spec (same values), pass another --study name, or add "
                                 "--allow-spec-change to join anyway (its trials then differ in more than the searched keys)")
        import sys

        print(f"automl: warning: joining {where} with another base spec (--allow-spec-change): {fingerprint.describe(diffs)}",
              file=sys.stderr)
    if study.direction.name.lower() != settings.direction:
        raise InputError(f"study {settings.study_name!r} {study.direction.name.lower()}s its metric", where="--direction",
                         fix="join it with its own --metric / --direction, or pass another --study name")
    if attrs.get(STOP_ATTR):
        if not settings.resume:
            raise InputError(f"study {settings.study_name!r} was stopped (skillbank automl --stop-study)", where="--study",
                             fix="pass --resume to continue it")
        study.set_user_attr(STOP_ATTR, False)
    recorded = recorded_keep(attrs)
    if settings.keep is not None and settings.keep != recorded:
        raise InputError(f"{where} keeps {recorded} checkpoints (--keep {recorded}, recorded when it was created): --keep {settings.keep} "
                         "would change it for the trials already run", where="--keep",
                         fix=f"drop --keep (the study keeps {recorded}), or pass another --study name")
    settings.keep = recorded
    if attrs.get(TRIALS_ATTR) != settings.max_trials:
        study.set_user_attr(TRIALS_ATTR, settings.max_trials)  # the budget the study's workers hold now (--status shows it)
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
    """RDB storage with heartbeats. Workers starting together race to create Optuna's tables (on
    PostgreSQL a losing CREATE fails with DuplicateTable or a unique violation): the tables are created
    under the storage's own lock (automl.lock, on an engine of its own), and a failure is retried."""
    import time

    import optuna
    import sqlalchemy
    import sqlalchemy.exc

    from skillbank.automl.lock import StudyLock
    from skillbank.automl.storage import check_url

    check_url(url)
    _quiet(optuna)
    engine_kwargs = {"connect_args": {"timeout": 60}} if url.startswith("sqlite") else {"pool_pre_ping": True}
    for attempt in range(attempts):
        try:
            engine = sqlalchemy.create_engine(url, poolclass=sqlalchemy.pool.NullPool)
            try:
                with StudyLock(url, "skillbank.automl.tables", engine):
                    return optuna.storages.RDBStorage(url, heartbeat_interval=HEARTBEAT_S, grace_period=GRACE_S,
                                                      heartbeat_stale_trial_callback=retry_stale_once, engine_kwargs=engine_kwargs)
            finally:
                engine.dispose()
        except (sqlalchemy.exc.OperationalError, sqlalchemy.exc.IntegrityError, sqlalchemy.exc.ProgrammingError):
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
        enqueue_retry(study, t)
        requeued.append(t.number)
    return requeued


def enqueue_retry(study, trial: Any) -> None:
    """Enqueue a failed (or stopped) trial's parameters again: `retry_of` names it, a baseline stays the
    baseline, its values (the user's units) are shown by --status while it waits."""
    attrs = {"retry_of": trial.number, "values": trial.user_attrs.get("values", {}),
             **({"baseline": True} if trial.user_attrs.get("baseline") else {})}
    study.enqueue_trial(trial.params, user_attrs=attrs)


def grid_points(space: SearchSpace) -> list[dict[str, Any]]:
    """Every combination of a space of choices (algorithm grid), in the order the choices were given."""
    import itertools

    bad = [p.key for p in space.params if p.kind not in ("categorical", "bool") or (p.weights and len(set(p.weights)) > 1)]
    if bad:
        raise InputError(f"the grid searches lists of choices; {', '.join(bad)} is a range", where="--algorithm grid",
                         fix=f"give {bad[0]} as --choices {bad[0]}=A,B,... or use --algorithm bayesian / random")
    return [dict(zip(space.keys(), combo)) for combo in itertools.product(*(p.choices for p in space.params))]
