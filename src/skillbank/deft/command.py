"""`skillbank deft --config FILE [--resume] [--dry-run] [--json]`: the DEFT loop, closed."""

from __future__ import annotations

import argparse
import json
import sys

DESCRIPTION = """\
Run the DEFT loop from a config (template: skills/applications/tao-run-deft/references/spec_template_deft.yaml):
round 0 evaluates the starting model on the proxy set and the frozen benchmark; each round then finds
the gaps on the proxy set (unparseable answers included), mines the nearest pool records (model
embeddings + FAISS; or random, the control), curates them (whole records, deduplicated, never a
benchmark item), retrains, evaluates every checkpoint on the proxy, and the proxy's best on the
benchmark. A round is adopted only when the benchmark improves by more than stop.min_gain; the stop
rule (target, max_rounds, patience) ends the loop. Preflight runs first: sets and records, benchmark
disjoint from pool / proxy / train set by id and video content, budgets.

Writes under output_dir: state.json (every stage: status, outputs, times), log.jsonl (append-only),
round_N/<stage>/..., embeddings/ (cache), report.html / report.md / report.json.
After a kill, --resume continues at the interrupted stage; finished stages are not redone.
"""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("deft", help="the DEFT loop: evaluate -> gaps -> mine -> curate -> retrain, round by round, with a report",
                       description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", required=True, metavar="FILE", help="DEFT config (YAML); schema: skills/applications/tao-run-deft/schemas/deft.schema.json")
    p.add_argument("--resume", action="store_true", help="continue the run in output_dir at its interrupted stage")
    p.add_argument("--dry-run", action="store_true", help="preflight and plan only; nothing is trained or written")
    p.add_argument("--json", action="store_true", help="print one JSON document {ok, stop_reason, best, report, ...}")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from skillbank.deft import preflight
    from skillbank.specification.deft import DeftConfig
    from skillbank.specification.io import load_spec

    config = load_spec(args.config, DeftConfig)
    stream = sys.stderr if args.json else sys.stdout

    def log(line: str) -> None:
        print(line, file=stream, flush=True)

    out = Path(config.output_dir).resolve()
    inputs = preflight.run(config, records=not args.resume)
    if args.dry_run:
        doc = {"ok": True, "dry_run": True, "preflight": inputs["summary"], "output_dir": str(out),
               "stages": ["round_0/evaluate", *(f"round_N/{s}" for s in ("gaps", "mine", "curate", "train", "evaluate", "decide"))],
               "max_rounds": config.stop.max_rounds, "resume": (out / "state.json").is_file()}
        print(json.dumps(doc, indent=2) if args.json else "\n".join(f"{k}: {v}" for k, v in doc.items()))
        return 0
    from skillbank.deft.loop import Loop
    from skillbank.deft.state import LoopState

    from skillbank import procs

    state = LoopState.open(out, config.model_dump(mode="json"), resume=args.resume)
    with procs.stop_on_signals():  # SIGTERM / Ctrl-C stop the training ranks with the loop
        result = Loop(config, inputs, state, log=log, progress=False, rank_stdout=sys.stderr if args.json else None).run()
    result["preflight"] = inputs["summary"]
    if args.json:
        print(json.dumps(result, indent=2, default=str))
    else:
        log(f"report: {result['report']['html']}")
    return 0
