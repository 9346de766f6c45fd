"""One worker's trials: claim a trial under the study's lock, run it, tell the study how it ended.

Optuna's `study.optimize` claims a trial without looking at what other workers run (two workers with
--max-trials 5 finished 6) and turns every stop into a logged traceback. Here the loop is ours
(ask and tell): a trial is claimed only while finished + running trials stay under --max-trials,
under the study's lock (`automl.lock`); a worker whose budget is taken by trials running elsewhere
waits for them (one may fail and run again) and ends when the study holds its finished trials.

A stop is not a crash. This worker's stop (SIGTERM / SIGINT: procs.stop_on_signals records it, the
runner's wait loop notices) fails its running trials with the reason, marks them `stopped`, and
enqueues each again (`retry_of`) for the other workers; a study-level stop (--stop-study, seen by a
thread polling the storage) fails them for --resume. Neither prints a traceback: the caller prints
one line naming them. The loop checks for a stop before each claim, in each wait, and after each trial
(the safe points). A trial that failed for an environment reason (TrialFailed) is one line too; any
other exception is a real crash: its traceback is printed, the trial fails, and the loop goes on for
RuntimeError / OSError (as Optuna's `catch` did) or the worker ends with it.
"""

from __future__ import annotations

import copy
import os
import signal
import socket
import sys
import threading
import traceback
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from skillbank import procs
from skillbank.automl.sampling import enqueue_values, holds, suggest
from skillbank.automl.space import SearchSpace
from skillbank.automl.study import (HEARTBEAT_S, STOP_POLL_S, Apply, Check, Runner, StudySettings, TrialFailed,
                                    _fail_orphans, _storage, enqueue_retry, finished_count, grid_points, open_study,
                                    requeue_failed, stop_requested)
from skillbank.errors import InputError
from skillbank.runs.steps import gib_text
from skillbank.specification.overrides import get_dotted, set_dotted

CLAIM_POLL_S = 2.0  # how often a worker whose budget is taken looks again
DONE, WAIT = "done", "wait"


def worker_id() -> str:
    """Who runs a trial (--status shows it): host:pid, and the job id when skillbank submitted the worker."""
    job = os.environ.get("SKILLBANK_JOB_ID")
    return f"{socket.gethostname()}:{os.getpid()}" + (f" ({job})" if job else "")


def set_all(spec: dict[str, Any], values: dict[str, Any]) -> None:
    for key, value in values.items():
        set_dotted(spec, key, value)


def trial_values(trial: Any, space: SearchSpace, base_spec: dict[str, Any]) -> dict[str, Any]:
    """The values a trial trains. The baseline's are the base spec's own: nothing is sampled for it, a
    null stays null (a nullable key, or fps on an nframes spec); the other keys are registered with
    Optuna (enqueued as the baseline's fixed values) so that the sampler learns from it."""
    if not trial.user_attrs.get("baseline"):
        return {p.key: suggest(trial, p) for p in space.params}
    values = {p.key: get_dotted(base_spec, p.key) for p in space.params}
    for p in space.params:
        if holds(p, values[p.key]):
            suggest(trial, p)
    return values


def objective_for(space: SearchSpace, base_spec: dict[str, Any], trials_dir: Path, runner: Runner,
                  check: Check | None = None, apply: Apply | None = None) -> Callable[[Any], float]:
    """The trial's work: its values into the base spec (an InputError prunes it), the check (a spec
    reason prunes it), the runner; its attributes say why it ended (trials.parquet, --status)."""
    import optuna

    apply = apply or set_all

    def objective(trial: optuna.Trial) -> float:
        values = trial_values(trial, space, base_spec)
        spec = copy.deepcopy(base_spec)
        trial_dir = trials_dir / f"trial_{trial.number:04d}"
        if "train" in spec:  # a train spec's trial trains into its own folder
            set_dotted(spec, "train.output_dir", str(trial_dir / "train"))
        set_dotted(spec, "results_dir", str(trial_dir))
        trial.set_user_attr("values", values)
        trial.set_user_attr("trial_dir", str(trial_dir))
        trial.set_user_attr("epochs_run", 0)
        if not trial.user_attrs.get("baseline"):  # the baseline's values are the base spec's own
            try:
                apply(spec, values)
            except InputError as exc:
                why = f"invalid spec: {exc.where + ': ' if exc.where else ''}{exc.message}"
                trial.set_user_attr("pruned_reason", why)
                raise optuna.TrialPruned(why) from None
            trial.set_user_attr("values", {k: get_dotted(spec, k) for k in values})  # as applied (typed by the model)
        why = check(trial_dir, spec) if check is not None else None
        if why:
            trial.set_user_attr("pruned_reason", why)
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
            trial.set_user_attr("pruned_reason", "the trial produced no metric")
            raise optuna.TrialPruned("the trial produced no metric")
        return outcome.value

    return objective


def run_trials(study, settings: StudySettings, storage, lock, objective: Callable[[Any], float], *,
               progress: Callable[[Any], None] | None = None) -> None:
    """Run trials until the study holds max_trials finished ones, it is stopped, or this worker is;
    settings.workers trials at once (threads). This worker starts at most as many trials as the study
    lacked finished ones when it began (as Optuna's n_trials): a failure is not replaced by a new
    sample here (--resume runs it again), so an environment that fails every trial ends the worker."""
    said: list[str] = []
    with lock:
        attempts = [max(0, settings.max_trials - finished_count(study))]

    halt = threading.Event()  # a crash in one thread: the others start no new trial (as Optuna's n_jobs)

    def loop() -> None:
        while not procs.stop_requested() and not halt.is_set():
            got = claim(study, settings, storage, lock, attempts)
            if got == DONE:
                return
            if got == WAIT:
                if not said:
                    said.append(WAIT)
                    print(f"automl: the study's {settings.max_trials} trials are finished or running: this worker waits "
                          "for the running ones (a failed one runs again here) and ends with the study", file=sys.stderr, flush=True)
                procs.STOPPING.wait(CLAIM_POLL_S)
                continue
            try:
                frozen = run_one(study, got, objective, storage, lock)
            except BaseException:
                halt.set()
                raise
            if frozen is not None:
                keep_sweep(study, settings.keep)
            if progress is not None and frozen is not None:
                progress(frozen)

    with _watch_study_stop(study):
        if settings.workers == 1:
            loop()
            return
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=settings.workers, thread_name_prefix="automl-trial") as pool:
            for future in [pool.submit(loop) for _ in range(settings.workers)]:
                future.result()


def claim(study, settings: StudySettings, storage, lock, attempts: list[int]):
    """Under the study's lock: DONE when the study holds max_trials finished trials (or a grid has no
    point left, or this worker has started its share: `attempts`), WAIT while finished + running trials
    take the budget, else a RUNNING trial of this worker (a waiting retry or the baseline first, then a
    new sample), its first heartbeat recorded."""
    with lock:
        if procs.stop_requested() or attempts[0] <= 0:
            return DONE
        _fail_orphans(study)  # a dead worker's trial: failed and enqueued again, once
        states = Counter(t.state.name for t in study.get_trials(deepcopy=False))
        finished, running = states["COMPLETE"] + states["PRUNED"], states["RUNNING"]
        if finished >= settings.max_trials:
            return DONE
        if settings.algorithm == "grid" and not states["WAITING"]:  # a grid ends with its points
            return WAIT if running else DONE
        if finished + running >= settings.max_trials:
            return WAIT
        trial = study.ask()
        attempts[0] -= 1
        storage.record_heartbeat(trial._trial_id)  # stale from now on if this worker dies without a word
        trial.set_user_attr("worker", worker_id())
        return trial


def run_one(study, trial: Any, objective: Callable[[Any], float], storage, lock) -> Any:
    """Run one claimed trial and tell the study how it ended; returns the finished trial (None when
    another worker had already ended it). A trial this worker's stop failed is enqueued again under the
    study's lock with its end, so no other worker claims a new trial in its place in between."""
    import optuna
    from optuna.trial import TrialState

    crash: BaseException | None = None
    with _beating(storage, trial._trial_id):
        try:
            value = objective(trial)
            state = TrialState.COMPLETE
        except optuna.TrialPruned:
            value, state = None, TrialState.PRUNED
        except BaseException as exc:  # noqa: BLE001 - every way a trial fails is said once, below
            value, state = None, TrialState.FAIL
            crash = _failed(trial, exc)
    with lock:
        try:
            frozen = study.tell(trial, value, state=state) if state == TrialState.COMPLETE else study.tell(trial, state=state)
        except optuna.exceptions.UpdateFinishedTrialError:
            return None
        if state == TrialState.FAIL and frozen.user_attrs.get("stopped") == "worker":
            enqueue_retry(study, frozen)  # this worker alone was stopped: another worker (or --resume) runs it again
    if crash is not None:
        raise crash
    return frozen


def _failed(trial: Any, exc: BaseException) -> BaseException | None:
    """Record why the trial failed; say it (one line, or a traceback for a real crash). Returns the
    exception the worker must end with (None: go on)."""
    stop = procs.stop_requested() or isinstance(exc, KeyboardInterrupt)
    if stop:
        worker = isinstance(exc, KeyboardInterrupt) or procs.stop_reason() == procs.SIGNALLED
        signum = procs.stop_signal() or getattr(exc, "signum", None)
        name = "SIGTERM / SIGINT" if signum is None else signal.Signals(signum).name
        reason = f"this worker was stopped ({name})" if worker else procs.STUDY_STOPPED
        trial.set_user_attr("fail_reason", f"stopped: {reason}")
        trial.set_user_attr("stopped", "worker" if worker else "study")
        return None
    trial.set_user_attr("fail_reason", str(exc) or type(exc).__name__)
    if isinstance(exc, TrialFailed):
        print(f"automl: trial {trial.number} failed: {exc}", file=sys.stderr, flush=True)
        return None
    print(f"automl: trial {trial.number} crashed:\n{''.join(traceback.format_exception(exc))}", file=sys.stderr, flush=True)
    return None if isinstance(exc, (RuntimeError, OSError)) else exc


def keep_sweep(study, keep: str | None) -> None:
    """The study's keep rule applied after a trial ends (automl.keep); one line says what went. A failure to delete is said, never fatal."""
    from skillbank.automl.keep import sweep

    try:
        dropped, freed = sweep(study, keep or "all")
    except OSError as exc:
        print(f"automl: keep {keep}: could not remove a trial's checkpoints: {exc}", file=sys.stderr, flush=True)
        return
    if dropped:
        print(f"automl: keep {keep}: removed the checkpoints of trial(s) {', '.join(f'#{n}' for n in dropped)} ({gib_text(freed)}): "
              "not the best so far (their metrics, spec and logs stay)", file=sys.stderr, flush=True)


@contextmanager
def _beating(storage, trial_id: int) -> Iterator[None]:
    """Optuna's heartbeat for a trial run outside study.optimize: a beat every HEARTBEAT_S while it runs."""
    done = threading.Event()

    def beat() -> None:
        while not done.wait(HEARTBEAT_S):
            try:
                storage.record_heartbeat(trial_id)
            except Exception:  # noqa: BLE001 - a storage hiccup: beat again next time
                continue

    thread = threading.Thread(target=beat, name=f"automl-heartbeat-{trial_id}", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()


@contextmanager
def _watch_study_stop(study) -> Iterator[None]:
    """While this worker runs trials, a thread polls the storage for a study-level stop and, when it
    comes, tells this worker's trials to stop (procs.request_stop: their runners fail them)."""
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


def stop_line(study, *, worker: bool, resume: str) -> str:
    """The one line a stopped worker ends with: which of its trials stopped, and what runs them again."""
    from skillbank.automl.study import retry_of

    me = worker_id()
    trials = study.get_trials(deepcopy=False)
    mine = [t for t in trials if t.user_attrs.get("worker") == me and t.user_attrs.get("stopped")]
    if worker:
        retries = {retry_of(t): t.number for t in trials if retry_of(t) is not None}
        signum = procs.stop_signal()
        name = signal.Signals(signum).name if signum else "SIGTERM / SIGINT"
        what = ", ".join(f"trial #{t.number} stopped and re-queued as #{retries[t.number]}" if t.number in retries
                         else f"trial #{t.number} stopped" for t in mine) or "no trial was running"
        return (f"automl: this worker stopped ({name}): {what}; other workers run what is queued, the rest goes on. "
                f"Start this worker again with: {resume}")
    what = ", ".join(f"#{t.number}" for t in mine)
    return (f"automl: the study was stopped (--stop-study): "
            + (f"trial(s) {what} of this worker stopped (FAIL)" if mine else "no trial of this worker was running")
            + f"; continue the study with: {resume}")


def run_study(settings: StudySettings, space: SearchSpace, base_spec: dict[str, Any], trials_dir: Path,
              runner: Runner, check: Check | None = None, progress: Callable[[Any], None] | None = None,
              apply: Apply | None = None):
    """Create or join the study (under its lock: the baseline and grid enqueued once, --resume's
    retries enqueued once, a dead worker's trials failed once), then run trials until the study holds
    max_trials finished ones, it is stopped, or this worker is."""
    from skillbank.automl.lock import StudyLock

    storage = _storage(settings.storage)
    lock = StudyLock(settings.storage, settings.study_name, storage.engine)
    with lock:
        study, created = open_study(settings, storage)
        if created:
            if settings.baseline:
                values = {p.key: get_dotted(base_spec, p.key) for p in space.params}
                study.enqueue_trial(enqueue_values(space, values), user_attrs={"baseline": True, "values": values})
            if settings.algorithm == "grid":  # the points not run yet stay WAITING in storage: --resume runs them
                for point in grid_points(space):
                    study.enqueue_trial(point, user_attrs={"values": point}, skip_if_exists=True)
        elif settings.resume:
            requeue_failed(study)
        _fail_orphans(study)
    objective = objective_for(space, base_spec, trials_dir, runner, check, apply)
    run_trials(study, settings, storage, lock, objective, progress=progress)
    return study
