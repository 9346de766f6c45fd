"""The `skillbank` command: a table of commands and the module of each (skillbank/commands/), dispatched lazily.

`skillbank X ...` imports X's module only; `skillbank --help` lists the table without importing any. Heavy
libraries (torch, transformers, cosmos_rl, optuna) are imported inside the command that runs.
To add a command: one module in skillbank/commands/ with register(subparsers) (its parser from
summary(name), shared flags from commands/flags) and one row here.
"""

from __future__ import annotations

import argparse
import importlib
import json
import signal
import sys

from skillbank import __version__
from skillbank.errors import InputError, RunError

PACKAGE = "skillbank.commands"
# name -> (module in skillbank/commands/, the one-line help `skillbank --help` lists), in the order it lists them.
# A module that registers several commands (evaluate: evaluate, inference) has their rows next to each other.
COMMANDS: dict[str, tuple[str, str]] = {
    "route": ("route", "decide AutoML handoff vs direct training for a request"),
    "data": ("data", "get data in: import, fix, stats"),
    "spec": ("spec", "build or edit (--from) a validated spec: template, dataset root and KEY=VALUE overrides; train states the plan"),
    "preflight": ("preflight", "check a spec, its data and the machine before a launch (exit 2 on any error)"),
    "plan": ("plan", "size a train or rl spec (or a described dataset): memory per GPU by part, settings that fit, time with start-up / checkpoints / validation, disk, layouts"),
    "train": ("train", "train from a spec (routes to AutoML or trains directly)"),
    "rl": ("rl", "GRPO (RL) after SFT: the cosmos-rl TOML and launch command, or --backend local runs it here"),
    "evaluate": ("evaluate", "evaluate a model (or every checkpoint of a run) -> results.json + metrics.json"),
    "inference": ("evaluate", "answer a prompt about one video, or run a model over a LLaVA file"),
    "score": ("score", "metrics.json from a results.json, no model needed (any engine's results)"),
    "compare": ("compare", "compare two evaluations of the same items: paired difference, exact McNemar, per family"),
    "gaps": ("gaps", "DEFT gap analysis: results.json -> failures parquet (+ summary JSON)"),
    "report": ("report", "report.html + report.md with pictures: loss curves, accuracy per family, confusion, failures with frames"),
    "automl": ("automl", "hyperparameter search with Optuna over the train schema (real trials)"),
    "submit": ("jobs", "run a train spec (or an AutoML study on it, or an rl spec's GRPO) on this machine, in Docker, or on Slurm (preflight first; a job record either way)"),
    "jobs": ("jobs", "status, logs, wait, cancel, attach or diagnose of a job (by id, record path, or any run folder for diagnose)"),
    "schemas": ("schemas", "generate or check action schemas, manifests, templates (maintainers)"),
    "validate": ("validate", "check skills: frontmatter, links, manifests, registry, generated files"),
    "make-tiny-model": ("assets", "build the tiny offline Qwen-VL model (embedded default)"),
    "make-demo-dataset": ("assets", "write the synthetic video QA demo dataset"),
    "demo": ("demo", "the main job on the embedded default: train, evaluate before/after, gap analysis"),
    "export": ("export", "merge a LoRA adapter or convert a checkpoint step into a Hugging Face safetensors folder"),
    "quantize": ("quantize", "quantize a trained model (FP8_DYNAMIC, W8A16, W4A16) into a folder vLLM and transformers load"),
    "deft": ("deft", "the DEFT loop: evaluate -> gaps -> mine -> curate -> retrain, round by round, with a report (deft init: the sets and config from a pool and a test set)"),
}


def summary(name: str) -> str:
    """The one-line help of a command (its module passes it to add_parser)."""
    return COMMANDS[name][1]


def command_modules() -> tuple[str, ...]:
    """Every command module, in the table's order (for whatever needs every parser: tests, docs)."""
    return tuple(dict.fromkeys(f"{PACKAGE}.{module}" for module, _ in COMMANDS.values()))


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


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The `skillbank` parser. `command`: that command's module alone is imported and registered, every other
    command is listed from COMMANDS without importing its module ("" lists them all so); None: every module
    registers its parsers (the whole tree: tests and docs that walk every command)."""
    parser = argparse.ArgumentParser(
        prog="skillbank",
        description="Agent skill bank for fine-tuning, evaluating and improving Cosmos-Reason video VLMs.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"skillbank {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    wanted = COMMANDS[command][0] if command in COMMANDS else None
    for name, (module, help_line) in COMMANDS.items():
        if name in sub.choices:
            continue  # registered by its module with the row before it
        if command is None or module == wanted:
            importlib.import_module(f"{PACKAGE}.{module}").register(sub)
        else:
            sub.add_parser(name, help=help_line)  # listed only: `skillbank NAME` imports its module
    return parser


def _report(exc: InputError | RunError, as_json: bool) -> None:
    """One JSON document on stdout under --json (bad input and failed runs alike), else one line on stderr."""
    if as_json:
        error = {"message": exc.message, "where": exc.where, "fix": exc.fix} if isinstance(exc, InputError) else {"message": str(exc), "where": "", "fix": ""}
        print(json.dumps({"ok": False, "error": error}, indent=2))
    else:
        print(f"error: {exc}" if isinstance(exc, InputError) else f"run failed: {exc}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(argv[0] if argv and argv[0] in COMMANDS else "")
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
