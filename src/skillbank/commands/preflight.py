"""`skillbank preflight`: check a launch before it happens (exit 0 ok, 2 errors; nothing launched).

Imports only argparse and json here; the checks load inside `run` (PyAV only with --decode-sample).
"""

from __future__ import annotations

import argparse
import json

from skillbank.commands.flags import (action_names, add_assignments, add_backend, add_gpus_per_node, add_json, add_nodes, add_skill, add_spec,
                                      add_start_check, command_parser, parse_count, start_check_mode)

DESCRIPTION = """\
Check everything that is known to break a launch, before it: the spec's rules, parallel sizes
against the machine, training steps per rank, every record of every annotations file (streamed),
media files, the token budget of video samples, redis-server, GPUs, the model and HF_TOKEN, free
disk and stale example caches. Exit 0 when there is no error (warnings allowed), 2 when there is one.

Token tally (train, rl): records that state their clip's length count it; when they do not, the
headers of about --probe-sample clips are read (PyAV, no decode, cached), and stats.probe says how many;
a clip that cannot be read counts the spec's whole vision budget (tokens_per_sample.budget counts them).

For train, the plan is printed first (stats.plan under --json): train records after the validation
split, records per data-parallel rank (padded to ceil(records / ranks) as cosmos-rl does), the
global batch (train_batch_per_replica is per data-parallel rank), optimizer steps per epoch (the
incomplete batch is dropped) and in all, checkpoints kept and their disk. Zero steps is an error,
fewer than 4 per epoch a warning; both propose batches and the steps each gives.

Checks come in three groups: spec (spec.*), data (annotations.*, media.*, vision.*, cache.*) and
env (env.*: HF_TOKEN, redis-server, GPUs for cosmos-rl, free disk at the output folder, the model).
Spec and data errors stop a launch everywhere. The environment is the machine's: with
--runs-on node (the plan is made here, the job runs on another machine) env findings are listed
as "check on the node" and do not fail; every job `skillbank submit` renders runs
`skillbank preflight --only env --runs-on here` as its first step on the node.

A spec written for another machine (`skillbank spec --path-map LOCAL=REMOTE`) is checked here with
the same --path-map: its REMOTE paths are read at LOCAL (stats.path_map lists the map).
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_skill(parser, "model skill, e.g. tao-finetune-cosmos-reason", required=True)
    parser.add_argument("--action", required=True, help=action_names())
    add_spec(parser, "the action's spec (YAML, JSON or TOML)", required=True, metavar="FILE")
    add_gpus_per_node(parser, "GPUs per node the job gets (checks the parallel sizes)", metavar="N")
    add_nodes(parser, "nodes the job gets (checks dp_replicate_size)", metavar="M")
    from skillbank.training.backends import DEFAULT_BACKEND

    add_backend(parser, f"training backend, as train / automl / submit take it (default: {DEFAULT_BACKEND}, as theirs): cosmos-rl also checks "
                        "redis-server, the GPUs and the model family; local checks what the local backend runs", default=DEFAULT_BACKEND)
    add_assignments(parser, "dotted key or shorthand override for this check only (repeatable; as `skillbank spec --set`); the file is not changed")
    parser.add_argument("--decode-sample", type=parse_count, default=0, metavar="K|all",
                        help="decode videos with PyAV and report what was measured: failures, clip lengths, frames sampled at the spec's fps / nframes. "
                             "K: K random videos of the train set (evaluate / inference / rl: of their one dataset); the validation set is not decoded. "
                             "all: every video of every dataset the action reads, custom.val_dataset included (default 0: none)")
    parser.add_argument("--probe-sample", type=parse_count, default=64, metavar="K|all",
                        help="train / rl: when records state no clip length, read the container headers (no decode; cached by path, size and mtime) "
                             "of about K train clips spread over the file for the token tally (stats.tokens_per_sample; stats.probe says how many); "
                             "all: every clip, as `skillbank plan` does; 0: none (default 64)")
    study = parser.add_argument_group("train: the spec is the base spec of an AutoML study (a worker's gate; `skillbank automl` and an automl job pass these)")
    study.add_argument("--trials", type=int, metavar="N",
                       help="the study's N trials: env.disk checks this worker's share of the study's disk (its running trials' every epoch + the kept "
                            "best; the same figure as `skillbank plan --trials N` and the AutoML dry run's disk_gib_per_worker); an error when it does not fit")
    study.add_argument("--trial-epochs", type=int, metavar="E", help="the most epochs a trial trains (a searched train.epoch range's high end; default train.epoch)")
    study.add_argument("--trial-workers", type=int, default=1, metavar="K", help="trials at once on this worker (automl --workers; default 1)")
    study.add_argument("--trial-lora-rank", type=int, metavar="R", help="the top of a searched policy.lora.r range (the largest LoRA checkpoint)")
    study.add_argument("--trial-full", action="store_true", help="the search may turn policy.lora.enable off (a trial may keep the full model)")
    from skillbank.commands.flags import add_keep_argument

    add_keep_argument(study)
    parser.add_argument("--runs-on", choices=("here", "node"), default="here",
                        help="where the job runs: here (default; env findings are errors) or node (another machine: env findings are 'check on the node')")
    parser.add_argument("--only", action="append", metavar="GROUP",
                        help="check only these groups: spec, data, env (repeat, or a comma list; default: all three)")
    from skillbank.commands.flags import add_path_map

    add_path_map(parser)
    add_start_check(parser, "rl: the GRPO start check: when the start model is a local folder and torch is installed, a few prompts "
                             "are sampled from it, n_generation times each, and a warning says when every group's rewards are equal "
                             "(nothing to learn; stats.start_check says what was sampled, how long it took and the share)")
    add_json(parser, "print one JSON document {ok, findings (each with its group), stats}")


def _study(args: argparse.Namespace):
    """The study's shape for env.disk (runs.disk.StudyShape), None without --trials."""
    if not getattr(args, "trials", None):
        return None
    from skillbank.runs.disk import DEFAULT_KEEP, StudyShape

    return StudyShape(args.trials, args.trial_epochs, args.trial_workers, args.trial_workers, args.keep or DEFAULT_KEEP, args.trial_lora_rank, args.trial_full)


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = command_parser(subparsers, "preflight", DESCRIPTION)
    add_arguments(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from skillbank.errors import InputError
    from skillbank.preflight.report import render_table
    from skillbank.preflight.run import run_preflight
    from skillbank.specification.io import LoadedSpec
    from skillbank.specification.pathmap import PathMap

    paths, loaded = PathMap.parse(args.path_map), None
    try:
        loaded = LoadedSpec.read(args.spec)  # read once: the map it records and every check take it
        paths = loaded.recorded_map().with_flags(args.path_map)
    except InputError:
        pass  # an unreadable spec is preflight's finding (spec.schema), not a refusal
    if args.assignments and loaded is not None:
        from skillbank.specification.build import with_assignments

        loaded = LoadedSpec(loaded.path, with_assignments(args.skill, args.action, loaded.raw(), args.assignments)[0])
    report = run_preflight(
        paths=paths,
        skill=args.skill,
        action=args.action,
        spec_path=args.spec,
        spec=loaded,
        gpus_per_node=args.gpus_per_node,
        nodes=args.nodes,
        backend=args.backend,
        decode_sample=args.decode_sample,
        runs_on=args.runs_on,
        only=args.only,
        start_check=start_check_mode(args) if args.action == "rl" else "off",
        probe_sample=args.probe_sample,
        study=_study(args),
    )
    if args.json:
        print(json.dumps(report.to_dict(), indent=2, ensure_ascii=False))
    else:
        if report.stats.get("plan"):
            from skillbank.runs.steps import plan_lines

            print("\n".join(plan_lines(report.stats["plan"])))
        line = tokens_line(report.stats)
        if line:
            print(line)
        print(render_table(report))
        check = report.stats.get("start_check")
        if check:
            from skillbank.training.local.grpo_start import line

            print(line(check))
        if report.stats.get("decode"):
            print(report.stats["decode"]["summary"])
    return 0 if report.ok else 2


def tokens_line(stats: dict) -> str | None:
    """Tokens per sample and where they came from (stated lengths, headers probed, the vision budget)."""
    t = stats.get("tokens_per_sample")
    if not t:
        return None
    probe = stats.get("probe")
    which = "every one" if probe and probe["sample"] == "all" else f"a sample of about {probe['sample']}" if probe else ""
    read = (f"; headers of {probe['clips']:,} clip(s) of {probe['records']:,} record(s) probed ({which}, {probe['from_cache']:,} from the cache)"
            if probe else "")
    budget = f"; {t['budget']:,} unreadable clip(s) counted at the vision budget" if t["budget"] else ""
    return f"tokens per sample: mean {t['mean']:,}, max {t['max']:,} over {t['samples']:,} sample(s), {t['bound']}{read}{budget}"


def main(argv: list[str] | None = None) -> int:
    """The same command as a script (scripts/check_tao_launch_preflight.py)."""
    parser = argparse.ArgumentParser(prog="check_tao_launch_preflight.py", description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(parser)
    return run(parser.parse_args(argv))
