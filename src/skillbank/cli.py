"""The `skillbank` command. Each subcommand lives in its own light module (argparse only at import);
heavy libraries (torch, transformers, cosmos_rl, optuna) are imported inside the command that runs."""

from __future__ import annotations

import argparse
import importlib
import json
import signal
import sys

from skillbank import __version__
from skillbank.errors import InputError, RunError

# (module, ...) in the order `--help` lists them; each module defines register(subparsers).
COMMAND_MODULES = (
    "skillbank.commands.route",
    "skillbank.commands.data",
    "skillbank.commands.spec",
    "skillbank.commands.preflight",
    "skillbank.commands.plan",
    "skillbank.commands.train",
    "skillbank.commands.rl",
    "skillbank.commands.evaluate",
    "skillbank.commands.score",
    "skillbank.commands.compare",
    "skillbank.commands.gaps",
    "skillbank.commands.report",
    "skillbank.commands.automl",
    "skillbank.commands.jobs",
    "skillbank.commands.schemas",
    "skillbank.commands.validate",
    "skillbank.commands.assets",
    "skillbank.commands.demo",
    "skillbank.commands.export",
    "skillbank.commands.quantize",
    "skillbank.commands.deft",
)

EPILOG = """\
typical agent flow:
  skillbank data import /data/my_clips --out /data/qa   # the user's clips + labels, HF dataset, CSV / JSONL or LLaVA
  skillbank route --skill tao-finetune-cosmos-reason --action train --request "plain training, no HPO" --json
  skillbank spec --skill tao-finetune-cosmos-reason --action train --dataset-root /data/qa -o train.yaml
  skillbank preflight --skill tao-finetune-cosmos-reason --action train --spec train.yaml --gpus-per-node 8
  skillbank plan --spec train.yaml --gpu h100-80gb                              # GPUs, memory by part, hours
  skillbank train --spec train.yaml --backend cosmos-rl --automl-policy off   # direct; auto hands off to AutoML
exit codes: 0 success; 2 the input is wrong (nothing was launched); 1 a run failed.
"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="skillbank",
        description="Agent skill bank for fine-tuning, evaluating and improving Cosmos-Reason video VLMs.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"skillbank {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name and name.startswith(exc.name):
                continue  # that command is not built yet
            raise
        module.register(sub)
    return parser


def _report(exc: InputError | RunError, as_json: bool) -> None:
    """One JSON document on stdout under --json (bad input and failed runs alike), else one line on stderr."""
    if as_json:
        error = {"message": exc.message, "where": exc.where, "fix": exc.fix} if isinstance(exc, InputError) else {"message": str(exc), "where": "", "fix": ""}
        print(json.dumps({"ok": False, "error": error}, indent=2))
    else:
        print(f"error: {exc}" if isinstance(exc, InputError) else f"run failed: {exc}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "run", None):
        parser.print_help()
        return 2
    as_json = bool(getattr(args, "json", False))
    try:
        return int(args.run(args) or 0)
    except InputError as exc:
        _report(exc, as_json)
        return 2
    except RunError as exc:
        _report(exc, as_json)
        return 1
    except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM / SIGINT at a safe point under skillbank.procs.stop_on_signals
        line = getattr(exc, "message", None) or "interrupted"  # one line: what was stopped
        signum = int(getattr(exc, "signum", 2))
        if as_json:
            print(json.dumps({"ok": False, "interrupted": signal.Signals(signum).name, "message": line}, indent=2))
        print(line, file=sys.stderr)
        return 128 + signum


if __name__ == "__main__":
    sys.exit(main())
