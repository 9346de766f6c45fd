"""The detached wrapper of a local job: runs the command, owns its state file, stops its process tree.

    python -m skillbank.platform.runner --state S --log L --cwd D -- skillbank train ...

`skillbank submit --platform local` starts this in its own session and returns. The runner writes
`state.json` (running, then succeeded / failed / cancelled with the exit code and end time), so a
status query never has to guess from a pid. On SIGTERM (`skillbank jobs cancel`) it terminates the
command and every process the command started (torchrun workers, the cosmos-rl launcher in its own
session), then SIGKILLs whatever is left after a grace period.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from skillbank import atomic, procs
from skillbank.runs.record import now

GRACE_S = 20.0


def _write_state(path: Path, **state: object) -> None:
    atomic.write_json(path, state)


def stop_tree(child: subprocess.Popen, grace_s: float = GRACE_S) -> None:
    """SIGTERM (+ SIGCONT) the command and its descendants, snapshotted first: they may change
    session (torchrun ranks, cosmos-rl workers); SIGKILL what is left after grace_s."""
    from skillbank import procs

    procs.stop(child.pid, grace_s=grace_s)


def runner_argv(python: str, *, state: Path, log: Path, cwd: Path, command: Sequence[str]) -> list[str]:
    """The runner's command line (`skillbank submit --platform local` starts it; `read_args` reads it back)."""
    return [python, "-m", "skillbank.platform.runner", "--state", str(state), "--log", str(log), "--cwd", str(cwd), "--", *command]


def read_args(argv: Sequence[str]) -> tuple[dict[str, str], list[str]]:
    """({state, log, cwd}, the command) of the line `runner_argv` wrote; SystemExit(2) naming the usage otherwise."""
    head, sep, command = list(argv), "--", []
    if sep in head:
        at = head.index(sep)
        head, command = head[:at], head[at + 1:]
    options = {key.removeprefix("--"): value for key, value in zip(head[0::2], head[1::2])}
    if len(head) % 2 or set(options) != {"state", "log", "cwd"} or not command:
        print("usage: python -m skillbank.platform.runner --state S --log L --cwd D -- COMMAND ... "
              f"(started by `skillbank submit --platform local`; got: {' '.join(argv) or 'nothing'})", file=sys.stderr)
        raise SystemExit(2)
    return options, command


def main(argv: list[str] | None = None) -> int:
    options, command = read_args(sys.argv[1:] if argv is None else argv)
    state = Path(options["state"])
    started = now()
    cancelled = False

    with open(options["log"], "ab", buffering=0) as log:
        try:
            child = procs.start(command, cwd=options["cwd"], stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)  # dies with the runner
        except OSError as exc:
            log.write(f"skillbank runner: cannot start {command[0]!r}: {exc}\n".encode())
            _write_state(state, status="failed", started=started, ended=now(), exit_code=127, pid=None)
            return 127

        def on_term(signum: int, _frame: object) -> None:
            nonlocal cancelled
            cancelled = True
            log.write(f"\nskillbank runner: signal {signum}: stopping the job\n".encode())
            stop_tree(child)

        signal.signal(signal.SIGTERM, on_term)
        signal.signal(signal.SIGINT, on_term)
        _write_state(state, status="running", started=started, pid=child.pid)
        while True:
            try:
                code = child.wait()
                break
            except InterruptedError:  # pragma: no cover - PEP 475 retries for us
                time.sleep(0.1)
    status = "cancelled" if cancelled else ("succeeded" if code == 0 else "failed")
    _write_state(state, status=status, started=started, ended=now(), exit_code=code, pid=child.pid)
    return 0


if __name__ == "__main__":
    sys.exit(main())
