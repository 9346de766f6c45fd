"""A study, from any machine: where it is, what it holds, stop every worker of it, delete it, its live view.

`skillbank automl ... --stop-study`, `--status`, `--delete-study` and `--dashboard` name the study as
the starting command does (--spec, --study, --out, --storage), so the same command line with one flag
added reaches it; --status and --delete-study also take --study NAME with --storage URL or --out DIR
alone (no spec: from a machine that has none). Nothing here creates a study or a database.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from skillbank.errors import InputError
from skillbank.redaction import redact


def study_location(args: argparse.Namespace, results_dir: str) -> tuple[str, Path, str]:
    """(study name, study folder, storage URL) of the study the flags name: --study (default: the spec
    file's stem), --out (default: <results_dir>/automl/<study>), --storage (default: a SQLite file there)."""
    name = args.study or Path(args.spec).stem
    out_dir = Path(args.out) if args.out else Path(results_dir) / "automl" / name
    return name, out_dir, args.storage or f"sqlite:///{(out_dir / 'study.db').resolve()}"


def _located(args: argparse.Namespace) -> tuple[str | None, str]:
    """(study name or None: the storage's only one, storage URL) of the study the flags name."""
    if not args.spec:
        if not (args.storage or args.out):
            raise InputError("which study? without --spec, name its storage", where="--spec",
                             fix="pass --storage URL (or --out DIR, the study folder holding study.db) and --study NAME, or the study's --spec")
        return args.study, args.storage or f"sqlite:///{(Path(args.out) / 'study.db').resolve()}"
    from skillbank.specification.io import load_spec

    if args.action == "evaluate":
        from skillbank.specification.evaluate import EvaluateSpec as model
    else:
        from skillbank.specification.registry import spec_model

        model = spec_model(args.skill, "train")
    name, _, storage = study_location(args, load_spec(args.spec, model).results_dir)
    return name, storage


def show_status(args: argparse.Namespace) -> int:
    """--status: every trial of the study (automl.status)."""
    from skillbank.automl.status import lines, open_existing, summary

    name, storage = _located(args)
    doc = summary(open_existing(storage, name))
    print(json.dumps(doc, indent=2, default=str) if args.json else "\n".join(lines(doc)))
    return 0


def delete_study(args: argparse.Namespace) -> int:
    """--delete-study --yes: the study and its trials leave the storage (refused while trials run)."""
    from skillbank.automl.status import delete, open_existing

    name, storage = _located(args)
    study = open_existing(storage, name)
    if not args.yes:
        held = len(study.get_trials(deepcopy=False))
        raise InputError(f"--delete-study removes study {study.study_name!r} and its {held} trial(s) from {redact(storage)}",
                         where="--delete-study", fix="add --yes to delete it (see it first with --status)")
    held = delete(study)
    out = {"ok": True, "study": study.study_name, "storage": redact(storage), "deleted": True, "trials": held}
    print(json.dumps(out, indent=2) if args.json else
          f"study {study.study_name}: deleted from {redact(storage)} with its {held} trial(s); the study folder's files stay")
    return 0


def stop_study(args: argparse.Namespace) -> int:
    """Mark the study stopped: each worker, on any machine, sees it within STOP_POLL_S, fails its running
    trials and exits; new workers are refused until --resume. Waits up to --wait s for the running
    trials to end and names them (one line)."""
    import optuna

    from skillbank.automl.status import open_existing
    from skillbank.automl.study import STOP_ATTR, STOP_POLL_S, _fail_orphans

    name, storage = _located(args)
    study = open_existing(storage, name)
    study.set_user_attr(STOP_ATTR, True)
    running = [t.number for t in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,))]
    deadline = time.monotonic() + max(0.0, args.wait)
    left = list(running)
    while left and time.monotonic() < deadline:
        time.sleep(min(1.0, STOP_POLL_S))
        _fail_orphans(study)  # a dead worker's trial would never end by itself
        states = {t.number: t.state.name for t in study.get_trials(deepcopy=False)}
        left = [n for n in running if states.get(n) == "RUNNING"]
    stopped = [n for n in running if n not in left]
    out = {"ok": True, "study": study.study_name, "storage": redact(storage), "stop_requested": True,
           "running_trials": len(running), "stopped_trials": stopped, "still_running": left}
    if args.json:
        print(json.dumps(out, indent=2))
        return 0
    if not running:
        line = "no trial was running"
    elif not left:
        line = f"trial(s) {_numbers(stopped)} stopped (FAIL; --resume runs them again)"
    else:
        line = (f"trial(s) {_numbers(stopped) or 'none'} stopped; {_numbers(left)} still running after {args.wait:.0f} s "
                f"(their workers stop within {STOP_POLL_S:.0f} s of seeing the stop; see --status)")
    print(f"study {study.study_name}: stopped: {line}; new workers are refused until one starts with --resume")
    return 0


def _numbers(numbers: list[int]) -> str:
    return ", ".join(f"#{n}" for n in numbers)


def serve_dashboard(args: argparse.Namespace) -> int:
    """optuna-dashboard on the study's storage, on 127.0.0.1 only (reach it from elsewhere with
    `ssh -L PORT:127.0.0.1:PORT host`); blocks until Ctrl-C / SIGTERM."""
    import optuna_dashboard

    from skillbank.automl.status import open_existing
    from skillbank.automl.study import _storage

    name, storage = _located(args)
    study = open_existing(storage, name)
    print(f"automl: live view of study {study.study_name} ({redact(storage)}) at http://127.0.0.1:{args.port}/dashboard/ "
          "(Ctrl-C ends it)", file=sys.stderr, flush=True)
    optuna_dashboard.run_server(_storage(storage), host="127.0.0.1", port=args.port)
    return 0
