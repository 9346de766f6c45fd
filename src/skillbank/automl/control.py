"""A running study, from any machine: where it is, stop every worker of it, its live view.

`skillbank automl ... --stop-study` and `--dashboard` name the study as the starting command does
(--spec, --study, --out, --storage), so the same command line with one flag added reaches it.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from skillbank.errors import InputError
from skillbank.redaction import redact


def study_location(args: argparse.Namespace, results_dir: str) -> tuple[str, Path, str]:
    """(study name, study folder, storage URL) of the study the flags name: --study (default: the spec
    file's stem), --out (default: <results_dir>/automl/<study>), --storage (default: a SQLite file there)."""
    name = args.study or Path(args.spec).stem
    out_dir = Path(args.out) if args.out else Path(results_dir) / "automl" / name
    return name, out_dir, args.storage or f"sqlite:///{(out_dir / 'study.db').resolve()}"


def _located(args: argparse.Namespace) -> tuple[str, Path, str]:
    from skillbank.specification.io import load_spec

    if args.action == "evaluate":
        from skillbank.specification.evaluate import EvaluateSpec as model
    else:
        from skillbank.specification.registry import spec_model

        model = spec_model(args.skill, "train")
    return study_location(args, load_spec(args.spec, model).results_dir)


def _existing(storage: str, name: str) -> None:
    import optuna

    from skillbank.automl.storage import check_url

    check_url(storage)
    if name in {s.study_name for s in optuna.get_all_study_summaries(storage)}:
        return
    raise InputError(f"no study {name!r} in {redact(storage)}", where="--study",
                     fix="name it as its start command did (--spec / --study / --out / --storage)")


def stop_study(args: argparse.Namespace) -> int:
    """Mark the study stopped: each worker, on any machine, sees it within seconds, fails its running
    trials and exits; new workers are refused until --resume."""
    import json

    from skillbank.automl.study import STOP_POLL_S, request_stop

    name, _, storage = _located(args)
    _existing(storage, name)
    running = request_stop(storage, name)
    out = {"ok": True, "study": name, "storage": redact(storage), "stop_requested": True, "running_trials": running}
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        print(f"study {name}: stop requested; {running} running trial(s) stop within {STOP_POLL_S:.0f} s "
              f"(they FAIL and run again on --resume)")
    return 0


def serve_dashboard(args: argparse.Namespace) -> int:
    """optuna-dashboard on the study's storage, on 127.0.0.1 only (reach it from elsewhere with
    `ssh -L PORT:127.0.0.1:PORT host`); blocks until Ctrl-C / SIGTERM."""
    import optuna_dashboard

    from skillbank.automl.study import _storage

    name, _, storage = _located(args)
    _existing(storage, name)
    print(f"automl: live view of study {name} ({redact(storage)}) at http://127.0.0.1:{args.port}/dashboard/ "
          "(Ctrl-C ends it)", file=sys.stderr, flush=True)
    optuna_dashboard.run_server(_storage(storage), host="127.0.0.1", port=args.port)
    return 0
