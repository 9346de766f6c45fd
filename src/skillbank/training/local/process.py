"""The command line of a local training process (the torchrun ranks of `skillbank train --backend local`,
the one GRPO process of `skillbank rl --backend local`), written by the launcher and read back here.

    python -m skillbank.training.local.worker --run-dir RUN --model-path MODEL [--resume-from CHECKPOINT]

Only the launchers start these processes, with exactly these options (the spec is RUN/spec.json), so
they are read as the pairs they were written as: no flags to parse, no help to print.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

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
        raise SystemExit(f"usage: python -m {prog} --run-dir RUN --model-path MODEL [--resume-from CHECKPOINT] "
                         f"(started by skillbank's local launcher; got: {' '.join(argv) or 'nothing'})")
    return ProcessArgs(Path(options["--run-dir"]), options["--model-path"], options.get("--resume-from"))
