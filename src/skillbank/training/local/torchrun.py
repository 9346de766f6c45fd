"""torchrun (`torch.distributed.run`), quiet when it is told to stop.

torchrun turns SIGTERM / SIGINT into a SignalException that it raises again after stopping its ranks,
so a requested stop (`skillbank jobs cancel`, a stopped AutoML worker, Ctrl-C) printed two pages of
traceback into the run's log, and a second signal during its shutdown a second one. Here that
exception ends torchrun with one line and 128 + the signal; a real failure (a rank that crashed:
ChildFailedError) keeps torchrun's own report and traceback.

    python -m skillbank.training.local.torchrun --standalone --nproc_per_node=W -m skillbank.training.local.worker ...
"""

from __future__ import annotations

import signal
import sys


def main() -> int:
    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.run import main as torchrun

    try:
        torchrun()
    except SignalException as exc:
        for sig in (signal.SIGTERM, signal.SIGINT):  # its ranks are stopped already: further signals change nothing
            signal.signal(sig, signal.SIG_IGN)
        print(f"torchrun: stopped ({signal.Signals(exc.sigval).name}); its ranks were stopped", file=sys.stderr, flush=True)
        return 128 + int(exc.sigval)
    return 0


if __name__ == "__main__":
    sys.exit(main())
