"""`skillbank preflight`: check a launch before it happens (exit 0 ok, 2 errors; nothing launched).

Imports only argparse and json here; the checks load inside `run` (PyAV only with --decode-sample).
"""

from __future__ import annotations

import argparse
import json

HELP = "check a spec, its data and the machine before a launch (exit 2 on any error)"
DESCRIPTION = """\
Check everything that is known to break a launch, before it: the spec's rules, parallel sizes
against the machine, training steps per rank, every record of every annotations file (streamed),
media files, the token budget of video samples, redis-server, the model and HF_TOKEN, free disk
and stale example caches. Exit 0 when there is no error (warnings allowed), 2 when there is one.
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--skill", required=True, help="model skill, e.g. tao-finetune-cosmos-reason")
    parser.add_argument("--action", required=True, help="train, evaluate, inference, quantize or export")
    parser.add_argument("--spec", required=True, metavar="FILE", help="the action's spec (YAML, JSON or TOML)")
    parser.add_argument("--gpus-per-node", type=int, metavar="N", help="GPUs per node the job gets (checks the parallel sizes)")
    parser.add_argument("--nodes", type=int, metavar="M", help="nodes the job gets (checks dp_replicate_size)")
    parser.add_argument("--backend", choices=("local", "cosmos-rl"), help="training backend (cosmos-rl also needs redis-server)")
    parser.add_argument("--decode-sample", type=int, default=0, metavar="K", help="decode K random videos with PyAV (default 0: none)")
    parser.add_argument("--json", action="store_true", help="print one JSON document {ok, findings, stats}")


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("preflight", help=HELP, description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from skillbank.preflight.report import render_table
    from skillbank.preflight.run import run_preflight

    report = run_preflight(
        skill=args.skill,
        action=args.action,
        spec_path=args.spec,
        gpus_per_node=args.gpus_per_node,
        nodes=args.nodes,
        backend=args.backend,
        decode_sample=args.decode_sample,
    )
    print(json.dumps(report.to_dict(), indent=2, ensure_ascii=False) if args.json else render_table(report))
    return 0 if report.ok else 2


def main(argv: list[str] | None = None) -> int:
    """The same command as a script (scripts/check_tao_launch_preflight.py)."""
    parser = argparse.ArgumentParser(prog="check_tao_launch_preflight.py", description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(parser)
    return run(parser.parse_args(argv))
