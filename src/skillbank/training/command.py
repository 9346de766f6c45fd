"""`skillbank train`: route (direct or AutoML), preflight, then the local or cosmos-rl backend.

Light at import (argparse only); the backends import torch / cosmos-rl when they run.
"""

from __future__ import annotations

import argparse
import json
import sys
from contextlib import nullcontext
from pathlib import Path
from typing import Any

from skillbank.errors import InputError

SKILL = "tao-finetune-cosmos-reason"
BACKENDS = ("cosmos-rl", "local")

DESCRIPTION = """\
Fine-tune Cosmos-Reason (Qwen2.5-VL / Qwen3-VL) on LLaVA video QA from a validated train spec.

The router decides first: with automl_policy auto (and AutoML packaged for the skill) the request
goes to AutoML; --automl-policy off trains directly. Preflight then checks every rule and record.
Backends: cosmos-rl (production, GPUs, one node to many) and local (torchrun + FSDP2 on this machine,
CPU or GPUs; what tests and the embedded demo use). Both write
<output_dir>/<timestamp>/checkpoints/step_N/policy and .../safetensors/step_N.
"""

EPILOG = """\
examples:
  skillbank train --spec train.yaml --backend cosmos-rl
  skillbank train --spec train.yaml --backend local --automl-policy off --dry-run
  skillbank train --spec train.yaml --backend local --automl-policy off --resume
exit codes: 0 trained; 2 bad input (nothing launched); 1 the run failed (resume with --resume).
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "train",
        help="train from a spec (routes to AutoML or trains directly)",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--spec", required=True, help="train spec (YAML/JSON/TOML) written by `skillbank spec`")
    p.add_argument("--backend", choices=BACKENDS, default="cosmos-rl", help="cosmos-rl (default, GPUs) or local (torchrun + FSDP2 here)")
    p.add_argument("--automl-policy", choices=("auto", "off"), default=None, help="auto: AutoML when the skill supports it; off: direct training for this run")
    p.add_argument("--automl-max-trials", dest="max_trials", type=int, default=8, metavar="N",
                   help="trials of the AutoML study when the request routes to AutoML (default: %(default)s)")
    p.add_argument("--request", default=None, help="the user's request in words (the router reads e.g. 'no HPO')")
    p.add_argument("--dry-run", action="store_true", help="print the plan (command, ranks, run folder) and launch nothing")
    p.add_argument("--resume", action="store_true", help="continue from the newest complete checkpoint under train.output_dir")
    p.add_argument("--json", action="store_true", help="print one JSON document on stdout (progress goes to stderr)")
    p.set_defaults(run=run)


def _preflight(args: argparse.Namespace) -> dict[str, Any]:
    from skillbank.preflight.run import run_preflight

    report = run_preflight(skill=SKILL, action="train", spec_path=args.spec, backend=args.backend, gpus_per_node=None, nodes=None)
    report.require_ok(skill=SKILL, action="train", spec_path=args.spec)
    return report.summary()


def _handoff_to_automl(args: argparse.Namespace) -> int:
    from skillbank.automl.run import run_from_train

    return int(run_from_train(args) or 0)


def run(args: argparse.Namespace) -> int:
    from skillbank.routing.router import route
    from skillbank.spec.io import load_spec
    from skillbank.spec.train import TrainSpec

    log_stream = sys.stderr if args.json else sys.stdout

    def log(line: str) -> None:
        print(line, file=log_stream, flush=True)

    spec = load_spec(args.spec, TrainSpec)
    decision = route(skill=SKILL, action="train", request=args.request, automl_policy=args.automl_policy)
    if decision.route == "automl":
        log(f"route: automl ({decision.reason})")
        return _handoff_to_automl(args)
    if not decision.runnable:
        raise InputError(f"the router cannot run this request: {decision.reason}", where="--automl-policy", fix="pass --automl-policy off to train directly")
    log(f"route: {decision.route} ({decision.reason})")
    preflight = _preflight(args)

    job = None
    if not args.dry_run:
        from skillbank.training.jobrecord import JobRecord

        job = JobRecord.start(action="train", backend=args.backend, spec_path=args.spec, argv=sys.argv, results_dir=spec.results_dir,
                              extra={"route": decision.to_dict()})
        log(f"job record: {job.path}")
    with job.tracking() if job is not None else nullcontext():
        if args.backend == "local":
            from skillbank.training.local.launch import train_local

            result: Any = train_local(spec, spec_path=args.spec, resume=args.resume, dry_run=args.dry_run, job=job, log=log,
                                      stdout=sys.stderr if args.json else None)
        else:
            from skillbank.training.cosmos_rl.launch import train_cosmos_rl

            result = train_cosmos_rl(spec, spec_path=Path(args.spec), resume=args.resume, dry_run=args.dry_run, job=job, log=log)
    if args.json:
        doc = {
            "ok": True,
            "backend": args.backend,
            "dry_run": args.dry_run,
            "route": decision.to_dict(),
            "preflight": preflight,
            "job_record": str(job.path) if job else None,
            "result": result if isinstance(result, dict) else {"exit_code": result},
        }
        print(json.dumps(doc, indent=2, default=str))
    return 0
