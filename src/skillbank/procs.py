"""Process trees: pause, continue and stop a command together with everything it started.

A process group is not enough: torchrun starts each rank in a session of its own
(start_new_session=True) and the cosmos-rl launcher does the same with its workers, so
os.killpg on the command's group reaches neither a SIGSTOP nor a SIGTERM to them; they were the
orphans of a killed study. Here a tree is a process and its descendants by parent pid, snapshotted
before each signal (a parent that exits first hands its children to init, out of a later look).

`skillbank train` and `skillbank automl` run inside `stop_on_signals()`: SIGTERM and SIGINT
signal every descendant at once and raise `Interrupted` (a KeyboardInterrupt) in the main thread,
so each launcher's own cleanup and the job record's "cancelled" run as for Ctrl-C.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

GRACE_S = 20.0  # SIGTERM -> SIGKILL
STOPPING = threading.Event()  # set once this process was told to stop; trial loops check it


class Interrupted(KeyboardInterrupt):
    """SIGTERM or SIGINT arrived; `signum` says which (the CLI exits 128 + signum)."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


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
    import psutil

    for proc in procs:
        try:
            proc.send_signal(sig)  # psutil refuses a pid reused by another process
        except psutil.Error:
            pass


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
    (and runs no step of its work first); one that was running ignores the SIGCONT."""
    _send(procs, signal.SIGTERM)
    _send(procs, signal.SIGCONT)


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
    """SIGTERM / SIGINT: every descendant gets SIGTERM (+ SIGCONT) at once, `Interrupted` is raised
    in the main thread and, when it leaves this block, what is still running is stopped; a second
    signal SIGKILLs the descendants. Elsewhere than the main thread this does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    count = 0

    def handler(signum: int, _frame: Any) -> None:
        nonlocal count
        count += 1
        STOPPING.set()
        procs = descendants(os.getpid())
        if count > 1:
            kill(procs)
            return
        terminate(procs)
        raise Interrupted(signum)

    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    for sig in previous:
        signal.signal(sig, handler)
    try:
        yield
    except KeyboardInterrupt:
        STOPPING.set()
        stop_descendants(grace_s=grace_s)
        raise
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
        STOPPING.clear()
