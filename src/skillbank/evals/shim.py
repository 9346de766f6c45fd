"""The `skillbank` an eval puts on the agent's PATH: runs the real command line and appends what ran (argv,
cwd, exit code, start time, seconds) to the workspace's transcript. `skillbank evals prepare` writes a
two-line script that execs `python -m skillbank.evals.shim ARGS` with SKILLBANK_EVAL_TRANSCRIPT set; a
skillbank that skillbank itself starts (a job's, a trial's) is not the agent's and is not recorded.
Only the standard library and the transcript writer are imported: it adds no start-up time worth counting.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from datetime import datetime, timezone

from skillbank.evals.transcript import record

ENV = "SKILLBANK_EVAL_TRANSCRIPT"
NESTED = "SKILLBANK_EVAL_NESTED"


def main(argv: list[str]) -> int:
    path = os.environ.get(ENV)
    env = dict(os.environ)
    env.pop(ENV, None)
    nested = bool(env.get(NESTED))
    env[NESTED] = "1"
    started = datetime.now(timezone.utc).isoformat(timespec="seconds")
    clock = time.perf_counter()
    child = subprocess.Popen([sys.executable, "-m", "skillbank.cli", *argv], env=env)

    def forward(signum: int, _frame: object) -> None:
        if child.poll() is None:
            child.send_signal(signum)

    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, forward)
    code = child.wait()
    if path and not nested:
        record(path, {"argv": argv, "cwd": os.getcwd(), "exit": code, "started": started,
                      "seconds": round(time.perf_counter() - clock, 3)})
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
