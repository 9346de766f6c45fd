"""`skillbank deft --config FILE [--resume] [--dry-run] [--json]`: the DEFT loop, closed."""

from __future__ import annotations

import argparse
import json
import sys

from skillbank.commands.flags import add_dry_run, add_json, command_parser

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
No config yet? `skillbank deft init --model M --pool P --benchmark B --out DIR` writes one and its sets
from a model, a labelled pool and a test set (`skillbank deft init --help`).
stop.adopt_on FAMILY adopts rounds on that family's benchmark accuracy; no other family may fall more
than stop.max_family_drop below the best model's.
"""


INIT_DESCRIPTION = """\
Write the DEFT sets and config from what you have: a model, a labelled pool and a test set.
  DIR/deft.yaml        the loop's config (`skillbank deft --config DIR/deft.yaml --dry-run` next)
  DIR/proxy.json       carved from the pool: --proxy-fraction of its clips (default 0.1), stratified by
                       `family`, two questions on one clip never split (the data import's splitter; --seed)
  DIR/pool.json        the pool without the proxy
  DIR/base_train.json  the training records every round keeps: the model's recipe's training data
                       (skillbank_recipe.json training_data), or --base FILE, less every record that shares
                       an id or video content (sha256, cached) with the benchmark
  DIR/train.yaml       a train spec for the model: the skill's template, the recipe's vision and prompt, one
                       node of this machine's GPUs (no GPU: the local backend, one rank, float32)
  DIR/eval.yaml        the evaluate settings every round shares (vision and prompt: the recipe's)
The benchmark is read as given and never written. Pool records that are benchmark items are left out of
every set; pool records already in the base training set are counted in a warning ("the pool is already
the model's training data" when most are). Records are written whole; deft.yaml and train.yaml name the
folders their videos are relative to (--*-media-dir, default: each file's folder). --json prints one
document {ok, config, sets, pool_left_out_benchmark, pool_in_base, backend, fitted, warnings, next}.
"""


def register(sub: argparse._SubParsersAction) -> None:
    p = command_parser(sub, "deft", DESCRIPTION)
    p.add_argument("--config", metavar="FILE", help="DEFT config (YAML); schema: skills/applications/tao-run-deft/schemas/deft.schema.json")
    p.add_argument("--resume", action="store_true", help="continue the run in output_dir at its interrupted stage")
    add_dry_run(p, "preflight and plan only; nothing is trained or written")
    add_json(p, "print one JSON document {ok, stop_reason, best, report, ...}; "
                   "a benchmark that leaks: {ok: false, error, overlaps: every overlapping record}")
    p.set_defaults(run=run)
    inner = p.add_subparsers(dest="deft_command", metavar="init")
    i = inner.add_parser("init", help="write deft.yaml and the sets (proxy, pool, base train set) from a model, a pool and a test set",
                         description=INIT_DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    i.add_argument("--model", required=True, metavar="M", help="starting model: an HF folder, a run's safetensors/step_N, hf_model://owner/repo")
    i.add_argument("--pool", required=True, metavar="P", help="labelled pool (LLaVA annotations.json): the proxy is carved from it, mining adds from the rest")
    i.add_argument("--benchmark", required=True, metavar="B", help="test set (LLaVA annotations.json): the frozen benchmark, read as given")
    i.add_argument("--out", required=True, metavar="DIR", help="where deft.yaml, the sets and the specs go")
    i.add_argument("--proxy-fraction", type=float, default=0.1, metavar="F", help="share of the pool's clips carved as the proxy (default 0.1)")
    i.add_argument("--seed", type=int, default=0, help="seed of the proxy carve (default 0)")
    i.add_argument("--base", metavar="FILE", help="base training set (default: the training data the model's recipe names)")
    i.add_argument("--pool-media-dir", default="", metavar="DIR", help="folder the pool's video paths are relative to (default: its file's folder)")
    i.add_argument("--benchmark-media-dir", default="", metavar="DIR", help="folder the benchmark's video paths are relative to (default: its file's folder)")
    i.add_argument("--base-media-dir", default="", metavar="DIR", help="folder the base set's video paths are relative to (default: the run's, else its file's folder)")
    add_json(i, "print one JSON document {ok, config, sets, pool_in_base, warnings, ...}")
    i.set_defaults(run=run_init)


def run_init(args: argparse.Namespace) -> int:
    from pathlib import Path

    from skillbank.deft.bootstrap import InitRequest, init

    doc = init(InitRequest(model=args.model, pool=args.pool, benchmark=args.benchmark, out=Path(args.out), pool_media=args.pool_media_dir,
                           benchmark_media=args.benchmark_media_dir, base=args.base, base_media=args.base_media_dir,
                           proxy_fraction=args.proxy_fraction, seed=args.seed))
    if args.json:
        print(json.dumps(doc, indent=2))
        return 0
    for warning in doc["warnings"]:
        print(f"warning: {warning}", file=sys.stderr)
    sets = doc["sets"]
    print(f"proxy     {sets['proxy']['records']:>7,} records  {sets['proxy']['path']}  (fraction {args.proxy_fraction} of the pool's clips, "
          f"by family {sets['proxy']['families']}, seed {args.seed})")
    print(f"pool      {sets['pool']['records']:>7,} records  {sets['pool']['path']}  (the pool without the proxy)")
    print(f"benchmark {sets['benchmark']['records']:>7,} records  {sets['benchmark']['path']}  (as given, not written)")
    print(f"base      {sets['base']['records']:>7,} records  {sets['base']['path']}  ({sets['base']['from']}; "
          f"{sets['base']['left_out_benchmark']} benchmark item(s) left out)")
    print(f"train spec {doc['train_spec']} (backend {doc['backend']}, {doc['gpus']} GPU(s): {doc['gpus_found_by']})")
    for fit in doc["fitted"]:
        print(f"  fitted {fit['key']} {fit['from']} -> {fit['to']}: {fit['why']}")
    print(f"eval config {doc['eval_config']}")
    print(f"wrote {doc['config']}; next: {doc['next']}")
    return 0


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from skillbank.deft import preflight
    from skillbank.deft.sets import OverlapError
    from skillbank.errors import InputError
    from skillbank.specification.deft import DeftConfig
    from skillbank.specification.io import load_spec

    if not args.config:
        raise InputError("skillbank deft needs --config FILE (or `deft init` to write one)", where="--config",
                         fix="skillbank deft init --model M --pool P --benchmark B --out DIR, then skillbank deft --config DIR/deft.yaml --dry-run")
    config = load_spec(args.config, DeftConfig)
    stream = sys.stderr if args.json else sys.stdout

    def log(line: str) -> None:
        print(line, file=stream, flush=True)

    out = Path(config.output_dir).resolve()
    try:
        inputs = preflight.run(config, records=not args.resume)
    except OverlapError as exc:
        if not args.json:
            raise
        print(json.dumps({"ok": False, "error": {"message": exc.message, "where": exc.where, "fix": exc.fix},
                          "overlaps": [o.to_dict() for o in exc.overlaps]}, indent=2))
        return 2
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
