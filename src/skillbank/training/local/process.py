"""The command line of a local training process (the torchrun ranks of `skillbank train --backend local`,
the one GRPO process of `skillbank rl --backend local`), written by the launcher and read back here.

    python -m skillbank.training.local.worker --run-dir RUN --model-path MODEL [--resume-from CHECKPOINT]

Only the launchers start these processes, with exactly these options (the spec is RUN/spec.json), so
they are read as the pairs they were written as: no flags to parse, no help to print.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from skillbank.runs import layout

OPTIONS = ("--run-dir", "--model-path", "--resume-from")


@dataclass(frozen=True)
class ProcessArgs:
    run_dir: Path  # the run folder the launcher created (holds spec.json)
    model_path: str  # local model folder with config.json
    resume_from: str | None = None  # a complete checkpoints/step_N/policy folder


def process_args(module: str, run_dir: Path, model_path: str, resume_from: Path | None) -> list[str]:
    """`-m MODULE` and the options every local training process takes (read back by `read_args`)."""
    argv = ["-m", module, "--run-dir", str(run_dir), "--model-path", model_path]
    return argv + (["--resume-from", str(resume_from.resolve())] if resume_from is not None else [])


def read_args(argv: Sequence[str], *, prog: str) -> ProcessArgs:
    """The options `process_args` wrote; SystemExit(2) naming the usage for anything else."""
    options = dict(zip(argv[0::2], argv[1::2]))
    if len(argv) % 2 or set(options) - set(OPTIONS) or not {"--run-dir", "--model-path"} <= set(options):
        print(f"usage: python -m {prog} --run-dir RUN --model-path MODEL [--resume-from CHECKPOINT] "
              f"(started by skillbank's local launcher; got: {' '.join(argv) or 'nothing'})", file=sys.stderr)
        raise SystemExit(2)
    return ProcessArgs(Path(options["--run-dir"]), options["--model-path"], options.get("--resume-from"))


def die_with_parent() -> None:
    """Linux: get SIGKILLed when the launcher (torchrun) dies, so a killed job never leaves orphan ranks."""
    if sys.platform.startswith("linux"):
        try:
            import ctypes
            import signal

            ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        except OSError:
            pass


def begin(argv: Sequence[str], *, prog: str, model: Any) -> tuple[ProcessArgs, Any]:
    """What a local training process does first: read its command line, die with its launcher, keep the
    hub offline (the launcher resolved the model), and read its spec (RUN/spec.json, validated by `model`)."""
    args = read_args(argv, prog=prog)
    die_with_parent()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    return args, model.model_validate_json((args.run_dir / layout.SPEC_FILE).read_text(encoding="utf-8"))
