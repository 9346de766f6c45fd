"""Process trees: pause, continue and stop a command together with everything it started.

A process group is not enough: torchrun starts each rank in a session of its own
(start_new_session=True) and the cosmos-rl launcher does the same with its workers, so
os.killpg on the command's group reaches neither a SIGSTOP nor a SIGTERM to them; they were the
orphans of a killed study. Here a tree is a process and its descendants by parent pid, snapshotted
before each signal (a parent that exits first hands its children to init, out of a later look).

`skillbank train`, `rl`, `deft` and `automl` run inside `stop_on_signals()`. Its signal handler never
raises: an exception raised from a handler lands in whatever the main thread runs at that moment, a
weakref callback or a `__del__` included, where Python prints "Exception ignored" and swallows it (a
lost stop: a worker that exited 1 instead of 143). The signal is only recorded (Python's C-level
handler writes its number to a self-pipe, `signal.set_wakeup_fd`); a thread reading that pipe marks
the stop (`stop_requested()`, `STOPPING`) and sends every descendant SIGTERM (SIGKILL on a second
signal) at once. Each process is asked to stop once: SIGTERM goes only to those no skillbank process
sent it before (a claim per process, `terminate`), so the stopper's own cleanup, a nested command that
a tree stop reached (it stops its own tree too) and the guards add none (a second one lands in torchrun's
shutdown, and means "kill now" to skillbank). The command acts at its safe points: `raise_if_stopped()`
raises `Interrupted` (a KeyboardInterrupt) there, in code that expects it: `wait(proc)` instead of
`proc.wait()`, `start()` (a stopping process starts nothing new), the cosmos-rl log watcher's loop,
each generation batch, a study's trial loop; and when the block ends. Each launcher's own cleanup and the job record's
"cancelled" then run as for Ctrl-C.

No orphans, however skillbank dies: every trainer, torchrun or cosmos-rl launcher starts through
`start()`, which runs it under a guard (`python -m skillbank.procs --parent PID -- ARGV`). The
guard is a Linux child subreaper (whatever its command starts, in any session, is re-parented to
it when its own parent dies, never to init) with a parent-death signal (prctl PR_SET_PDEATHSIG):
when the skillbank process that started it dies, even by SIGKILL, the guard stops its whole tree.
Guards are never paused nor sent SIGTERM by the tree functions here (a paused guard could not act);
a signal sent to a guard itself is passed on to its command. Each start can leave a pid file
(owner, host, a token every descendant inherits in its environment): `stop_leftovers(folder)`
stops what a dead predecessor left there (a study's or a run's --resume calls it first).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable

GRACE_S = 20.0  # SIGTERM -> SIGKILL
STOPPING = threading.Event()  # set once this process was told to stop; trial loops check it
SIGNALLED = "this worker was stopped (SIGTERM / SIGINT)"
STUDY_STOPPED = "the study was stopped (skillbank automl --stop-study)"
_reason: list[str] = []
_signals: list[int] = []  # the stop signals received (appended by the stop thread, read at safe points)


def request_stop(reason: str, signum: int | None = None) -> None:
    """Tell this process's trial loops to stop (STOPPING), saying why (stop_reason); `signum`: a signal asked."""
    if signum is not None:
        _signals.append(signum)
    _reason[:] = [reason]
    STOPPING.set()


def stop_reason() -> str | None:
    return _reason[0] if STOPPING.is_set() and _reason else None


def stop_signal() -> int | None:
    """The signal that asked this process to stop (SIGTERM / SIGINT), None when none did."""
    return _signals[0] if _signals else None


def stop_requested() -> bool:
    return STOPPING.is_set()


class Interrupted(KeyboardInterrupt):
    """SIGTERM or SIGINT arrived; `signum` says which (the CLI exits 128 + signum). `message`: the one
    line the CLI prints for it (what was stopped), else "interrupted"."""

    def __init__(self, signum: int, message: str | None = None):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum
        self.message = message


def raise_if_stopped() -> None:
    """A safe point: raise Interrupted when a signal asked this process to stop (see the module docstring)."""
    if _signals:
        raise Interrupted(_signals[0])


def wait(proc: subprocess.Popen, poll_s: float = 0.2, tick: Callable[[], None] | None = None) -> int:
    """proc.wait() that is a safe point: its exit code, or Interrupted as soon as a signal asked this
    process to stop (the caller stops the process, as it did for Ctrl-C), also when the process ended
    meanwhile (the stop thread's SIGTERM ends it: its exit code is the stop's, not a failure).
    tick: called between two looks (a job record reading the run's progress; it paces itself)."""
    while True:
        raise_if_stopped()
        if tick is not None:
            tick()
        try:
            code = proc.wait(timeout=poll_s)
        except subprocess.TimeoutExpired:
            continue
        raise_if_stopped()
        return code


def tree(pid: int) -> list[Any]:
    """The process and its descendants (psutil.Process objects), parents before children; [] if gone."""
    import psutil

    try:
        root = psutil.Process(pid)
        return [root, *root.children(recursive=True)]
    except psutil.Error:
        return []


def descendants(pid: int) -> list[Any]:
    return tree(pid)[1:]


def _send(procs: Iterable[Any], sig: int) -> None:
    """Signal each; guards get only SIGKILL (they stop their own command when it matters, and a paused
    guard could not act on its parent's death)."""
    import psutil

    for proc in procs:
        try:
            if sig != signal.SIGKILL and is_guard(proc):
                continue
            proc.send_signal(sig)  # psutil refuses a pid reused by another process
        except psutil.Error:
            pass


def is_guard(proc: Any) -> bool:
    import psutil

    try:
        cmd = proc.cmdline()
    except psutil.Error:
        return False
    return cmd[1:4] == ["-m", GUARD_MODULE, "--parent"]


def alive(proc: Any) -> bool:
    """Running or stopped; a zombie (exited, not yet reaped by its parent) counts as gone."""
    import psutil

    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def pause(pid: int) -> list[Any]:
    """SIGSTOP the whole tree (root first, so it starts nothing new); returns what was paused."""
    procs = tree(pid)
    _send(procs, signal.SIGSTOP)
    return procs


def resume(pid: int) -> list[Any]:
    """SIGCONT the whole tree (the processes a pause reached: nothing stopped can have spawned)."""
    procs = tree(pid)
    _send(reversed(procs), signal.SIGCONT)
    return procs


def terminate(procs: list[Any]) -> None:
    """SIGTERM, then SIGCONT, to each: a paused process acts on the pending SIGTERM as it continues
    (and runs no step of its work first); one that was running ignores the SIGCONT. SIGTERM goes only
    to those no skillbank process sent it before (`_claim_stops`): a stop is asked once."""
    _send(_claim_stops(procs), signal.SIGTERM)
    _send(procs, signal.SIGCONT)


def _claim_stops(procs: list[Any]) -> list[Any]:
    """Those of `procs` (guards aside) whose one SIGTERM this process claims: no skillbank process (this
    one or another) asked them to stop before. A tree stop reaches every process of the tree, a nested
    command's included; that command stops its own tree when its SIGTERM arrives, and the stopper's
    cleanup stops the tree once more: without the claim torchrun got two or three SIGTERMs (one that
    lands in its shutdown prints a traceback into the run's log) and a paused trial's `skillbank train`
    a second one, which means "kill now". A claim is a file named by pid and start time (a reused pid
    is another process), created exclusively in a folder of this user's; one that cannot be written
    leaves the signal to be sent."""
    import psutil
    import tempfile

    folder = Path(tempfile.gettempdir()) / f"skillbank-stops-{os.getuid()}"
    try:
        folder.mkdir(mode=0o700, exist_ok=True)
        _forget_gone(folder)
    except OSError:
        pass
    claimed = []
    for proc in procs:
        if is_guard(proc):
            continue
        try:
            os.close(os.open(folder / f"{proc.pid}-{proc.create_time():.2f}", os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
        except (FileExistsError, psutil.Error):
            continue  # asked before, or gone
        except OSError:
            pass
        claimed.append(proc)
    return claimed


def _forget_gone(folder: Path) -> None:
    """Remove the claims of processes that are gone (their pid free, or another process's)."""
    import psutil

    for path in folder.iterdir():
        pid, _, started = path.name.partition("-")
        try:
            if f"{psutil.Process(int(pid)).create_time():.2f}" == started:
                continue
        except (psutil.Error, ValueError):
            pass
        path.unlink(missing_ok=True)


def kill(procs: list[Any]) -> None:
    _send(procs, signal.SIGKILL)


def wait_gone(procs: list[Any], timeout: float) -> list[Any]:
    """Wait until each is gone (or a zombie); returns those still alive at the deadline."""
    deadline = time.monotonic() + timeout
    left = [p for p in procs if alive(p)]
    while left and time.monotonic() < deadline:
        time.sleep(0.05)
        left = [p for p in left if alive(p)]
    return left


def stop(pid: int, *, grace_s: float = GRACE_S, also: Iterable[Any] = ()) -> None:
    """Stop a process tree: SIGTERM (+ SIGCONT) to all, SIGKILL to what is left after grace_s,
    including anything a survivor started meanwhile. `also`: processes snapshotted earlier that
    may have left the tree since (orphans of a parent that already exited)."""
    procs = _unique([*tree(pid), *also])
    terminate(procs)
    left = wait_gone(procs, grace_s)
    if left:
        late = _unique([*left, *(d for p in left for d in descendants(p.pid))])
        kill(late)
        wait_gone(late, 5.0)


def stop_descendants(*, grace_s: float = GRACE_S) -> None:
    """Stop every process this one started (directly or not), leaving this one running."""
    procs = descendants(os.getpid())
    if not procs:
        return
    terminate(procs)
    left = wait_gone(procs, grace_s)
    kill(_unique([*left, *(d for p in left for d in descendants(p.pid))]))


def _unique(procs: Iterable[Any]) -> list[Any]:
    seen, out = set(), []
    for proc in procs:
        if proc.pid not in seen:
            seen.add(proc.pid)
            out.append(proc)
    return out


@contextmanager
def stop_on_signals(*, grace_s: float = GRACE_S) -> Iterator[None]:
    """SIGTERM / SIGINT are recorded, never raised from the handler (module docstring): a thread sends
    every descendant SIGTERM (+ SIGCONT) at once (SIGKILL on a second signal) and marks the stop; the
    body acts on it at its safe points (raise_if_stopped, wait, start). When Interrupted leaves the
    block, or the block ends after a signal (raised here: a safe point), what is still running is
    stopped. Elsewhere than the main thread this does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    read_fd, write_fd = os.pipe()
    os.set_blocking(write_fd, False)
    watched = (signal.SIGTERM, signal.SIGINT)
    previous = {sig: signal.getsignal(sig) for sig in watched}
    for sig in watched:
        signal.signal(sig, _record_only)
    previous_fd = signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
    thread = threading.Thread(target=_act_on_signals, args=(read_fd, set(watched)), name="skillbank-stop", daemon=True)
    thread.start()
    try:
        yield
        if _signals:  # the block ended after a signal without reaching a safe point: this is one
            raise Interrupted(_signals[0])
    except KeyboardInterrupt:
        request_stop(SIGNALLED)
        stop_descendants(grace_s=grace_s)
        raise
    finally:
        signal.set_wakeup_fd(previous_fd)
        for sig, old in previous.items():
            signal.signal(sig, old)
        os.close(write_fd)  # the stop thread reads EOF and ends
        thread.join(timeout=5.0)
        os.close(read_fd)
        STOPPING.clear()
        _reason.clear()
        _signals.clear()


def _record_only(_signum: int, _frame: Any) -> None:
    """The Python-level handler: nothing. Python's C handler already wrote the signal's number to the
    wakeup pipe, which the stop thread reads; raising here could land in any callback (module docstring)."""


def _act_on_signals(read_fd: int, watched: set[int]) -> None:
    """The stop thread: each stop signal read from the wakeup pipe marks the stop and signals the
    descendants (SIGTERM + SIGCONT the first time, SIGKILL after). Never raises."""
    count = 0
    while True:
        try:
            data = os.read(read_fd, 64)
        except OSError:
            return
        if not data:
            return
        for signum in data:
            if signum not in watched:
                continue
            count += 1
            try:
                request_stop(SIGNALLED, signum)
                found = descendants(os.getpid())
                kill(found) if count > 1 else terminate(found)
            except Exception:  # noqa: BLE001 - a process gone meanwhile: the safe points stop the rest
                pass


# ---- the guard: no process outlives the skillbank process that started it ----

GUARD_MODULE = "skillbank.procs"
TOKEN_ENV = "SKILLBANK_PROC_TREE"  # inherited by every descendant: what stop_leftovers recognises
PID_FILE = "procs.json"
_PR_SET_PDEATHSIG, _PR_SET_CHILD_SUBREAPER = 1, 36


def start(argv: list[str], *, pid_file: Path | None = None, env: dict[str, str] | None = None, **popen: Any) -> subprocess.Popen:
    """Start training or evaluation work (Popen's keywords) so that it dies with this process, however
    this one dies: under a guard (module docstring). Popen's pid is the guard's; signals sent to it,
    and procs.pause / stop / tree on it, reach the command. `pid_file`: where to record it for
    `stop_leftovers` (a study's trial folder, a run folder)."""
    import uuid

    raise_if_stopped()  # a stopping process starts no new work
    token = uuid.uuid4().hex
    env = {**(os.environ if env is None else env), TOKEN_ENV: token}
    guard = [sys.executable, "-m", GUARD_MODULE, "--parent", str(os.getpid()), "--", *argv]
    proc = subprocess.Popen(guard, env=env, **popen)
    if pid_file is not None:
        _record(Path(pid_file), proc.pid, token, argv)
    return proc


def _started(pid: int) -> float | None:
    import psutil

    try:
        return psutil.Process(pid).create_time()
    except psutil.Error:
        return None


def _record(path: Path, pid: int, token: str, argv: list[str]) -> None:
    import socket

    from skillbank import atomic
    from skillbank.redaction import redact

    path.parent.mkdir(parents=True, exist_ok=True)
    atomic.write_json(path, {"host": socket.gethostname(), "owner": os.getpid(), "owner_started": _started(os.getpid()),
                             "pid": pid, "token": token, "argv": [redact(a) for a in argv]})


def stop_leftovers(folder: Path, *, grace_s: float = GRACE_S) -> list[int]:
    """Stop what a dead predecessor started under `folder` (pid files there and one level down) on this
    host: every process whose environment carries a recorded token, when the recording skillbank
    process is gone. Live owners' work (another worker on one study) is left alone. Returns the pids stopped."""
    import json
    import socket

    import psutil

    folder = Path(folder)
    tokens = set()
    for path in [folder / PID_FILE, *folder.glob(f"*/{PID_FILE}")]:
        try:
            rec = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if rec.get("host") != socket.gethostname():
            continue
        started = _started(int(rec.get("owner", 0)))
        if started is not None and started == rec.get("owner_started"):
            continue  # its owner lives: not a leftover
        tokens.add(rec.get("token"))
    if not tokens:
        return []
    found = []
    for proc in psutil.process_iter():
        try:
            if proc.pid != os.getpid() and proc.environ().get(TOKEN_ENV) in tokens:
                found.append(proc)
        except psutil.Error:
            continue
    if found:
        terminate(found)
        kill(wait_gone(found, grace_s))
        wait_gone(found, 5.0)
    return [p.pid for p in found]


def _libc() -> Any:
    import ctypes

    return ctypes.CDLL(None, use_errno=True)


def _prctl(option: int, value: int, libc: Any = None) -> None:
    if sys.platform.startswith("linux"):
        (libc or _libc()).prctl(option, value, 0, 0, 0)


def die_with_parent(parent: int) -> None:
    """For a helper process forked by skillbank (a pool worker): SIGKILL when `parent` dies, however it
    dies (Linux parent-death signal); exits at once when the parent died before this could be set."""
    _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:
        os._exit(1)


_WATCHED = {signal.SIGCHLD, signal.SIGTERM, signal.SIGINT, signal.SIGHUP}


def _guard(parent: int, argv: list[str]) -> int:
    """Run argv; stop its whole tree (re-parented orphans included) when `parent` dies; exit as argv
    exited (a signal's death included). Signals arrive one at a time (sigwaitinfo, which says who sent
    each): SIGTERM / SIGHUP from the parent (Popen.terminate) are passed on to argv; from anyone else
    (a terminal's group, Slurm's job-wide signal) they reached argv too, so passing them on would
    deliver them twice (a second SIGTERM means "kill now" to skillbank train)."""
    signal.pthread_sigmask(signal.SIG_BLOCK, _WATCHED)
    _prctl(_PR_SET_CHILD_SUBREAPER, 1)
    _prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != parent:
        return 1  # the parent died before this guard could watch it: start nothing

    libc = _libc()  # loaded before the fork: the child only calls it

    def in_child() -> None:  # the command dies with the guard too, should the guard ever be SIGKILLed
        signal.pthread_sigmask(signal.SIG_UNBLOCK, _WATCHED)
        _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, libc)

    try:
        child = subprocess.Popen(argv, preexec_fn=in_child)
    except OSError as exc:
        print(f"skillbank: cannot start {argv[0]!r}: {exc}", file=sys.stderr)
        return 127
    code = None
    while code is None:
        info = signal.sigwaitinfo(_WATCHED)
        if os.getppid() != parent:  # the starter died (the parent-death signal, or noticed on any signal)
            stop_descendants()
            return 128 + signal.SIGTERM
        if info.si_signo == signal.SIGCHLD:
            code = _reap(child.pid)  # re-parented orphans are reaped too, not only the command
        elif info.si_signo != signal.SIGINT and info.si_pid == parent:
            os.kill(child.pid, info.si_signo)
    child.returncode = code
    stop_descendants(grace_s=5.0)  # what the command left behind
    if code < 0:  # die of the same signal, so the starter sees what its command saw
        signal.signal(-code, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {-code})
        os.kill(os.getpid(), -code)
    return code


def _reap(pid: int) -> int | None:
    """Reap every exited child; the exit code of `pid` when it was among them."""
    code = None
    while True:
        try:
            done, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return code
        if done == 0:
            return code
        if done == pid:
            code = os.waitstatus_to_exitcode(status)


def _main(argv: list[str]) -> int:
    if len(argv) < 4 or argv[0] != "--parent" or argv[2] != "--":
        print("usage: python -m skillbank.procs --parent PID -- COMMAND...", file=sys.stderr)
        return 2
    return _guard(int(argv[1]), argv[3:])


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
