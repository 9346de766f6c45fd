"""`skillbank deft --config FILE [--resume] [--dry-run] [--json]`: the DEFT loop, closed."""

from __future__ import annotations

import argparse
import json
import sys

from skillbank.commands.flags import add_assignments, add_backend, add_dry_run, add_gpus_per_node, add_json, add_nodes, add_path_map, command_parser
from skillbank.scoring.stats import MEASURE_HALF_WIDTH, MEASURE_MIN_RECORDS  # light: the stats functions, no model

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

Stop reasons: target, max_rounds, patience, pool_exhausted, no_gaps, and proxy_is_training_data: no gaps
on the proxy while >= 50% of its records are training items of the base train set (same video content
and question), so the proxy cannot show the model's errors (state.json stop.why and the report say so
with the counts; the dry run's preflight.training_overlap counts proxy and pool records beforehand).
A proxy of fewer than 39 records is warned about (preflight.proxy_size: its 95% interval's half width):
it cannot measure a gap or pick a checkpoint. So is a pool smaller than mining.records_per_round x stop.max_rounds
(preflight.pool_budget; `deft init` warns with the same rule): the loop stops with pool_exhausted when it runs dry.
--gpus-per-node / --nodes (a DEFT job passes its allocation) that change the train spec's dp_shard_size /
dp_replicate_size change the rounds' global batch (train_batch_per_replica x data-parallel ranks): the
dry run, the loop's log and a job's notes then warn "the allocation (...) changes every round's train spec
...: global batch OLD -> NEW ...; optimizer steps per epoch ... at the base train set's records; set
train.train_batch_per_replica=N to keep OLD" (preflight.batch_change in JSON, as `skillbank spec --from`).

Where it runs: here, or as one job (`skillbank submit --action deft --platform local|docker|slurm
--config deft.yaml`: every attempt runs `skillbank deft --config <copy> --resume`, so a requeued job
continues at its round). --dry-run --runs-on node checks a config for another machine: spec and data
here, the environment (model, HF_TOKEN, redis-server, GPUs, disk) listed as "check on the node".
"""


INIT_DESCRIPTION = """\
Write the DEFT sets and config from what you have: a model, a labelled pool and a test set.
  DIR/deft.yaml        the loop's config (`skillbank deft --config DIR/deft.yaml --dry-run` next)
  DIR/proxy.json       carved from the pool: --proxy-fraction of its clips (default 0.1), stratified by
                       `family`, two questions on one clip never split (the data import's splitter; --seed)
  DIR/pool.json        the pool without the proxy
  DIR/base_train.json  the training records every round keeps: the model's recipe's training data
                       (skillbank_recipe.json training_data), or --base FILE, less every record that shares
                       an id or video content (sha256, cached) with the benchmark. A model folder without
                       skillbank_recipe.json (or a hub id) needs --base FILE, the training set it was
                       fine-tuned on: without it init exits 2 naming the folder and the missing file
  DIR/train.yaml       a train spec for the model: the skill's template, the recipe's vision and prompt, one
                       node of this machine's GPUs (no GPU: the local backend, one rank, float32)
  DIR/eval.yaml        the evaluate settings every round shares (vision and prompt: the recipe's)
The benchmark is read as given and never written. Pool records that are benchmark items are left out of
every set; pool and proxy records already in the base training set (same video content and question)
are counted in warnings ("the pool is already the model's training data" when most are; a proxy that is
>= 50% training items finds no gaps and the loop stops with proxy_is_training_data). Records are written
whole; deft.yaml and train.yaml name the folders their videos are relative to (--*-media-dir, default:
each file's folder).
Where rounds train: --gpus-per-node N --nodes M (default: this machine's GPUs, one node) become
train.yaml's policy.parallelism (dp_shard_size N, dp_replicate_size M), --backend retrain.backend
(default cosmos-rl with GPUs, local without); train.yaml takes every vision setting of the model's
recipe (fps or nframes, total_pixels, max_pixels): rounds train at the resolution evaluation uses.
--adopt-on FAMILY writes stop.adopt_on. --set KEY=VALUE (repeatable) sets any other key of the loop's
config by its dotted name (stop.max_rounds=5, mining.records_per_round=128, stop.target=0.9), checked by
the config model before anything is read or written: an unknown key or a bad value exits 2 naming the
key; the keys init writes from its flags (model, the sets, train_spec, eval_config, output_dir, paths)
are refused, naming the flag. --path-map LOCAL=REMOTE: the sets are read here at LOCAL,
deft.yaml and train.yaml name REMOTE and record the map (paths.map): later commands here read LOCAL,
the node reads them as written (`skillbank submit --action deft --platform slurm --config DIR/deft.yaml`).
A proxy of fewer than @@MIN@@ records (a 95% Wilson interval on its accuracy wider than +-@@POINTS@@ points at 50%)
is warned about with its interval and the --proxy-fraction that gives about @@MIN@@ (proxy_size in JSON); so is a
pool (after the carve) smaller than mining.records_per_round x stop.max_rounds after --set (pool_budget in JSON:
the dry run's rule), with the --set that spreads it over the rounds. Warnings print as `warning: ...` and
`  fix: ...` lines before the closing line (under --json: the warnings list, each "WHAT; fix: FIX").
--json prints one document {ok, config, sets, pool_left_out_benchmark, training_overlap: {proxy, pool:
{count, of, share, ids}}, proxy_size: {records, min_records, ci95_half_width, one_answer, enough},
pool_budget: {records, records_per_round, max_rounds, need, rounds_fed, enough},
rounds_train_on, adopt_on, path_map, set, fitted, warnings, next}.
""".replace("@@MIN@@", str(MEASURE_MIN_RECORDS)).replace("@@POINTS@@", f"{MEASURE_HALF_WIDTH * 100:.0f}")


def register(sub: argparse._SubParsersAction) -> None:
    p = command_parser(sub, "deft", DESCRIPTION)
    p.add_argument("--config", metavar="FILE", help="DEFT config (YAML); schema: skills/applications/tao-run-deft/schemas/deft.schema.json")
    p.add_argument("--resume", action="store_true", help="continue the run in output_dir at its interrupted stage (a new run when it has none)")
    add_dry_run(p, "preflight and plan only; nothing is trained or written")
    p.add_argument("--runs-on", choices=("here", "node"), default="here",
                   help="with --dry-run: where the loop will run; node: environment findings (model, HF_TOKEN, redis-server, GPUs, disk) "
                        "are listed as 'check on the node' instead of failing, spec and data are checked here all the same")
    add_gpus_per_node(p, "GPUs per node every round trains on: the round's train spec gets dp_shard_size = N/(tp*cp*pp) "
                         "(default: the train spec's; 0: CPU ranks as the train spec has them; a DEFT job passes its allocation)", metavar="N")
    add_nodes(p, "nodes every round trains on: the round's train spec gets dp_replicate_size = M (default: the train spec's)", metavar="M")
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
    i.add_argument("--base", metavar="FILE", help="the training set the model was fine-tuned on: every round keeps it, and pool/proxy records "
                                                  "in it are counted as training items (default: the training data the model folder's "
                                                  "skillbank_recipe.json names; without that file, or for a hub id, init exits 2 asking for --base)")
    i.add_argument("--pool-media-dir", default="", metavar="DIR", help="folder the pool's video paths are relative to (default: its file's folder)")
    i.add_argument("--benchmark-media-dir", default="", metavar="DIR", help="folder the benchmark's video paths are relative to (default: its file's folder)")
    i.add_argument("--base-media-dir", default="", metavar="DIR", help="folder the base set's video paths are relative to (default: the run's, else its file's folder)")
    add_gpus_per_node(i, "GPUs per node each round trains on (train.yaml dp_shard_size; default: this machine's; 0: CPU ranks)", metavar="N")
    i.add_argument("--nodes", type=int, default=1, metavar="M", help="nodes each round trains on (train.yaml dp_replicate_size; default 1; >1 needs cosmos-rl)")
    add_backend(i, "retrain.backend (default: cosmos-rl with GPUs, local without)")
    i.add_argument("--adopt-on", default=None, metavar="FAMILY", help="stop.adopt_on: adopt rounds on this benchmark family's accuracy (the others guarded)")
    add_assignments(i, "a DEFT config key of deft.yaml (repeatable; dotted, as in the schema: stop.max_rounds=5, "
                       "mining.records_per_round=128, mining.strategy=random, stop.target=0.9, stop.min_gain=0.01, retrain.start_from=base); "
                       "checked by the config model before anything is written (a bad key or value exits 2 naming it)")
    add_path_map(i)
    add_json(i, "print one JSON document {ok, config, sets, training_overlap, rounds_train_on, warnings, ...}")
    i.set_defaults(run=run_init)


def run_init(args: argparse.Namespace) -> int:
    from pathlib import Path

    from skillbank.deft.bootstrap import InitRequest, init
    from skillbank.deft.rules import pool_budget_line, proxy_size_line
    from skillbank.errors import warning_lines

    doc = init(InitRequest(model=args.model, pool=args.pool, benchmark=args.benchmark, out=Path(args.out), pool_media=args.pool_media_dir,
                           benchmark_media=args.benchmark_media_dir, base=args.base, base_media=args.base_media_dir,
                           proxy_fraction=args.proxy_fraction, seed=args.seed, gpus_per_node=args.gpus_per_node, nodes=args.nodes,
                           backend=args.backend, path_map=tuple(args.path_map), adopt_on=args.adopt_on,
                           settings=tuple(args.assignments)))
    if args.json:
        print(json.dumps(doc, indent=2))
        return 0
    sets = doc["sets"]
    print(f"proxy     {sets['proxy']['records']:>7,} records  {sets['proxy']['path']}  (fraction {args.proxy_fraction} of the pool's clips, "
          f"by family {sets['proxy']['families']}, seed {args.seed})")
    print(f"pool      {sets['pool']['records']:>7,} records  {sets['pool']['path']}  (the pool without the proxy)")
    print(f"benchmark {sets['benchmark']['records']:>7,} records  {sets['benchmark']['path']}  (as given, not written)")
    print(f"base      {sets['base']['records']:>7,} records  {sets['base']['path']}  ({sets['base']['from']}; "
          f"{sets['base']['left_out_benchmark']} benchmark item(s) left out)")
    on = doc["rounds_train_on"]
    shape = f"{on['nodes']} node(s) x {on['gpus_per_node']} GPU(s)" if on["gpus_per_node"] else f"{on['ranks_per_node']} CPU rank(s)"
    vision = ", ".join(f"{k} {v:,}" if isinstance(v, int) else f"{k} {v}" for k, v in on["vision"].items() if v is not None)
    print(f"train spec {doc['train_spec']} (backend {on['backend']}, {shape}: {on['gpus_found_by']}; vision {vision})")
    for role, o in doc["training_overlap"].items():
        print(f"  {role} records already in the base training set: {o['count']} of {o['of']} ({o['share']:.0%})")
    print(f"  {proxy_size_line(doc['proxy_size'])}")
    print(f"  {pool_budget_line(doc['pool_budget'])}")
    if doc["adopt_on"]:
        print(f"  rounds are adopted on family {doc['adopt_on']} (stop.adopt_on)")
    for key, value in doc["set"].items():
        print(f"  {key} = {value} (--set)")
    if doc["path_map"]:
        print(f"  deft.yaml and train.yaml name the node's paths (path map {', '.join(doc['path_map'])})")
    for fit in doc["fitted"]:
        print(f"  fitted {fit['key']} {fit['from']} -> {fit['to']}: {fit['why']}")
    print(f"eval config {doc['eval_config']}")
    for warning in doc["warnings"]:  # on stdout, before the closing line (under --json: in the document only)
        print("\n".join(warning_lines(warning)))
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

    if args.runs_on == "node" and not args.dry_run:
        raise InputError("--runs-on node checks a config for another machine; the loop itself runs here", where="--runs-on",
                         fix="add --dry-run, or run the loop where it trains (`skillbank submit --action deft --config FILE`)")
    out = Path(config.output_dir).resolve()
    try:
        inputs = preflight.run(config, records=not args.resume, runs_on=args.runs_on, gpus_per_node=args.gpus_per_node, nodes=args.nodes)
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
        print(json.dumps(doc, indent=2) if args.json else "\n".join(dry_run_lines(doc)))
        return 0
    from skillbank.deft.loop import Loop
    from skillbank.deft.state import LoopState

    from skillbank import procs

    change = inputs["summary"]["batch_change"]
    if change:  # the allocation (a DEFT job's, or --gpus-per-node / --nodes) changed the rounds' global batch
        log(f"warning: {change['line']}")
    state = LoopState.open(out, config.model_dump(mode="json", exclude={"paths"}), resume=args.resume)  # how the file was written is no part of the run
    with procs.stop_on_signals():  # SIGTERM / Ctrl-C stop the training ranks with the loop
        result = Loop(config, inputs, state, log=log, progress=False, rank_stdout=sys.stderr if args.json else None).run()
    result["preflight"] = inputs["summary"]
    if args.json:
        print(json.dumps(result, indent=2, default=str))
    else:
        log(f"report: {result['report']['html']}")
    return 0


def dry_run_lines(doc: dict) -> list[str]:
    """The dry run in words: the sets, where rounds train, what is left to check on the node, the warnings."""
    from skillbank.deft.rules import pool_budget_line, proxy_size_line
    from skillbank.errors import warning_lines

    pre = doc["preflight"]
    on = pre["rounds_train_on"]
    lines = [f"DEFT preflight passed (runs on: {pre['runs_on']}); nothing was run",
             "sets: " + ", ".join(f"{k} {v:,}" for k, v in pre["records"].items()) + "; the benchmark shares no id and no video content with them",
             f"rounds train with {on['backend']} on {on['nodes']} node(s) x {on['ranks_per_node']} rank(s)"]
    lines += [f"{role} records already in the base train set: {o['count']} of {o['of']} ({o['share']:.0%})" for role, o in pre["training_overlap"].items()]
    lines += [proxy_size_line(pre["proxy_size"]), pool_budget_line(pre["pool_budget"])]
    lines += [f"check on the node: {line}" for line in pre["check_on_node"]]
    lines += [line for w in pre["warnings"] for line in warning_lines(w)]
    lines += [f"output_dir: {doc['output_dir']}" + (" (holds a run: --resume continues it)" if doc["resume"] else ""),
              f"stages: {', '.join(doc['stages'])}; at most {doc['max_rounds']} round(s)"]
    return lines
