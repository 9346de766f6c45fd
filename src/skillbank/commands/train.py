"""`skillbank train`: route (direct or AutoML), preflight, then the local or cosmos-rl backend.

Light at import (argparse only); the backends import torch / cosmos-rl when they run.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from contextlib import nullcontext
from pathlib import Path
from typing import Any

from skillbank.automl import DEFAULT_ALGORITHM
from skillbank.commands.flags import (add_backend, add_dry_run, add_json, add_launcher_flags, add_resume_from, add_search_arguments,
                                      add_spec, command_parser, DEFAULT_SKILL)
from skillbank.errors import InputError
from skillbank.training.backends import BACKEND_HELP, DEFAULT_BACKEND

SKILL = DEFAULT_SKILL  # the skill whose action this command runs

DESCRIPTION = """\
Fine-tune Cosmos-Reason (Qwen2.5-VL / Qwen3-VL) on LLaVA video QA from a validated train spec.

The router decides first: with automl_policy auto (the default; AutoML packaged for the skill) the
request goes to AutoML, so a bare `skillbank train --spec train.yaml` starts a study of several trials,
not one run (it warns; --dry-run shows the study plan): pass --automl-policy off for one direct run.
AutoML runs a study on this spec with the same backend (`skillbank automl`: the base spec
must pass preflight first, --dry-run prints the study plan and starts nothing; --algorithm, --param,
--range, --choices, --search, --study and --automl-max-trials narrow it; anything else: call `skillbank
automl`). Values you set in the spec (its user_set: `skillbank spec --set epochs=3`) are not searched.
--automl-policy off trains directly. Preflight then checks every rule and record.
Backends: cosmos-rl (production, GPUs, one node to many) and local (torchrun + FSDP2 on this machine,
CPU or GPUs; what tests and the embedded demo use). Both write
<output_dir>/<timestamp>/checkpoints/step_N/policy and .../safetensors/step_N.
A dry run launches nothing and writes only what it prints: the local backend nothing, cosmos-rl the
TOML in a job folder <results_dir>/jobs/<train-...>/ (no run folder under output_dir, nothing under
the cache). With --path-map LOCAL=REMOTE (dry runs only: a plan for another machine) the spec's
REMOTE paths are read at LOCAL here and the TOML names REMOTE.
SIGTERM / SIGINT stop the whole process tree (torchrun and its ranks, or the cosmos-rl launcher and
its workers) and mark the job record cancelled.
"""

EPILOG = """\
examples:
  skillbank train --spec train.yaml --automl-policy off --backend cosmos-rl          # direct training
  skillbank train --spec train.yaml --automl-policy off --backend local --dry-run    # direct: the plan only
  skillbank train --spec train.yaml --automl-policy off --backend local --resume     # direct: continue a run
  skillbank train --spec train.yaml --automl-policy off --resume-from out/20250101120000/checkpoints/step_400
                                                          # a new run from a chosen checkpoint (any run's)
  skillbank train --spec train.yaml --automl-policy off --dry-run --path-map /home/me=/lustre/me   # the node's TOML
  skillbank train --spec train.yaml --automl-policy auto --dry-run                   # AutoML: the study plan only
  skillbank train --spec train.yaml --automl-policy auto --param train.optm_lr --automl-max-trials 4
exit codes: 0 trained; 2 bad input (nothing launched); 1 the run failed (cosmos-rl: the log watcher's verdict, never the
launcher's own exit code; --resume continues from the last complete checkpoint when one was written).
Every run folder, either backend: metrics.jsonl (a row per step and per validation), tensorboard/, result.json
(status, reason, last step of total, losses, the final validation and whether it was at the final step), the
recipe (skillbank_recipe.json) in every safetensors/step_N; the job record <results_dir>/jobs/<id>.json follows
the progress as it goes (`skillbank jobs status ID`). See the model skill's references/outputs.md.
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    p = command_parser(subparsers, "train", DESCRIPTION, epilog=EPILOG)
    add_spec(p, "train spec (YAML/JSON/TOML) written by `skillbank spec`", required=True)
    add_backend(p, BACKEND_HELP, default=DEFAULT_BACKEND)
    p.add_argument("--automl-policy", choices=("auto", "off"), default=None,
                   help="auto: AutoML when the skill supports it; off: direct training for this run (default: the router's, from --request, else auto)")
    p.add_argument("--request", default=None, help="the user's request in words (the router reads e.g. 'no HPO')")
    add_dry_run(p, "print the plan (command, ranks, run folder; on the AutoML route the study plan) and launch nothing; "
                   "plans for the machine that will train: spec and data must pass, HF_TOKEN / redis-server / GPUs / disk are listed as 'check on the node'; "
                   "writes nothing but cosmos-rl's TOML in the job folder it prints (<results_dir>/jobs/<id>/; a relative results_dir "
                   "from the spec file's folder, never the current directory); "
                   "with cosmos-rl it prints the first training chat as the trainer gets it ('first chat :', every turn)")
    from skillbank.commands.flags import add_path_map

    add_path_map(p)
    p.add_argument("--resume", action="store_true", help="continue from the newest complete checkpoint under train.output_dir (AutoML route: continue the study)")
    add_resume_from(p, "start a new run from this checkpoint, of this run or another: a checkpoints/step_N/policy folder, its step_N folder, "
                   "or a run folder (its newest complete checkpoint); complete by cosmos-rl's markers (cosmos_config + one .rank_R_complete "
                   "per saving rank). cosmos-rl: train.resume = \"<path>\"; local: weights, optimizer, schedule and step. With --resume too, "
                   "the newest checkpoint under output_dir wins when there is one (a requeued job). `skillbank jobs diagnose RUN` names the last complete one")
    job = p.add_argument_group("a job's run (what `skillbank submit` renders; usable by hand)")
    job.add_argument("--run-dir", metavar="DIR", default=None,
                     help="the run folder: created when missing, instead of a new <output_dir>/<timestamp>; with --resume its own newest complete "
                          "checkpoint continues (no other run under output_dir is looked at); holding checkpoints without --resume: refused")
    add_launcher_flags(job)
    search = p.add_argument_group("AutoML route (automl_policy auto): narrow the study, as `skillbank automl` does")
    add_search_arguments(search, trials_flags=("--automl-max-trials",))
    add_json(p, "print one JSON document on stdout (progress goes to stderr)")
    p.set_defaults(run=run)


def _preflight(args: argparse.Namespace, loaded: Any, log: Any) -> dict[str, Any]:
    """Spec and data must pass wherever this runs; the environment (token, redis-server, GPUs, disk)
    is this machine's only for a real run: a dry run plans for the machine that will train, so its
    env findings are listed as "check on the node" instead of stopping the plan."""
    from skillbank.preflight.report import finding_line
    from skillbank.preflight.run import run_preflight

    runs_on = "node" if args.dry_run else "here"
    paths = loaded.recorded_map().with_flags(args.path_map)
    report = run_preflight(skill=SKILL, action="train", spec=loaded, backend=args.backend, gpus_per_node=None, nodes=None, runs_on=runs_on,
                           **({"paths": paths} if paths else {}))
    report.require_ok(skill=SKILL, action="train", spec_path=args.spec)
    summary = report.summary()
    for line in summary["check_on_node"]:
        log(f"preflight: check on the node: {line}")
    for finding in summary["warning_findings"]:  # what `skillbank preflight` would show: no count without its findings
        log(f"preflight: warning: {finding_line(finding)}")
    return summary


def _resume_from(args: argparse.Namespace, log: Any) -> Path | None:
    """--resume-from as a complete step_N/policy folder; a dry run may name a path only the node has."""
    if not args.resume_from:
        return None
    from skillbank.runs import layout

    try:
        return layout.resolve_checkpoint(args.resume_from)
    except ValueError as exc:
        if args.dry_run and not Path(args.resume_from).expanduser().exists():
            log(f"preflight: check on the node: --resume-from {args.resume_from} (not on this machine)")
            return Path(args.resume_from)
        raise InputError(str(exc), where="--resume-from",
                         fix="pass a complete checkpoint (`skillbank jobs diagnose RUN_DIR` names the last complete one), or --resume") from None


def _refit(spec: Any, job: Any, log: Any) -> Any:
    """A spec whose batches `skillbank spec` fitted to other records (its fitted block: a sample, often) fitted again to the
    records here, the keys the user set kept (runs.fitting.refit); each change logged and recorded (a job's node.json, or the
    foreground record's `fitted`)."""
    if not spec.fitted.ceilings:
        return spec
    from skillbank.runs import fitting, steps

    count, val_records = steps.count_data(spec)
    inside = type(job).__name__ == "Attempt"
    spec, changes = fitting.refit(spec, count, val_records, counted=spec.custom.train_dataset.annotation_path, where="node" if inside else "run")
    for change in changes:
        log(f"refit: {change['key']} {change['from']} -> {change['to']}: {change['why']}")
    if changes and job is not None:
        job.fit(changes)
    return spec


def _handoff_to_automl(args: argparse.Namespace, loaded: Any) -> int:
    from skillbank.commands.automl_run import run_from_train

    return int(run_from_train(args, loaded) or 0)


def bare_train_warning(spec: str, source: str, trials: int) -> str:
    """What a `skillbank train` without --automl-policy does when the skill's automl_policy is auto: a study, not one run."""
    said = "the request's words" if source == "request" else "the skill's default, auto"
    return (f"`skillbank train` without --automl-policy follows automl_policy ({said}): this starts an AutoML study of {trials} "
            f"trial(s), not one run; one direct run: skillbank train --spec {spec} --automl-policy off")


def _no_search_flags(args: argparse.Namespace, route: str) -> None:
    """AutoML's search flags on a direct run would be ignored silently: refuse them instead."""
    given = [flag for flag, value in (("--algorithm", args.algorithm != DEFAULT_ALGORITHM), ("--param", args.param), ("--range", args.range),
                                      ("--choices", args.choices), ("--search", args.search), ("--study", args.study)) if value]
    if given:
        raise InputError(f"{', '.join(given)} narrow an AutoML study, but this request routes {route}", where=given[0],
                         fix="drop them, or pass --automl-policy auto (or call `skillbank automl`)")


def run(args: argparse.Namespace) -> int:
    from skillbank.commands.flags import spec_and_paths
    from skillbank.routing.router import route
    from skillbank.specification.pathmap import PathMap
    from skillbank.specification.train import TrainSpec

    log_stream = sys.stderr if args.json else sys.stdout

    def log(line: str) -> None:
        print(line, file=log_stream, flush=True)

    if args.path_map and not args.dry_run:
        PathMap.parse(args.path_map)  # a malformed map is named first
        raise InputError("--path-map plans for another machine: it goes with --dry-run (this command trains here)", where="--path-map",
                         fix="add --dry-run, or use `skillbank submit --path-map ...` to render the job for the node")
    # read once: the model, the path map and preflight all take it; a real run trains here: the spec's recorded
    # map only moves its paths to LOCAL (LoadedSpec.model)
    loaded, paths = spec_and_paths(args.spec, args.path_map, recorded_too=args.dry_run)
    spec = loaded.model(TrainSpec)
    decision = route(skill=SKILL, action="train", request=args.request, automl_policy=args.automl_policy)
    if decision.action != "train":  # the request asks for RL (GRPO): that is the rl action's spec, not this SFT one
        raise InputError(f"the request routes to the {decision.action} action: {decision.reason}", where="--request",
                         fix="write an rl spec (skillbank spec --skill tao-finetune-cosmos-reason --action rl -o rl.yaml) and run `skillbank rl --spec rl.yaml`; or drop RL from the request to run SFT")
    if decision.route == "automl":
        if args.resume_from:
            raise InputError("--resume-from starts one training run from a checkpoint, but this request routes to AutoML",
                             where="--resume-from", fix="pass --automl-policy off to train directly (AutoML resumes its study with --resume)")
        if paths:
            raise InputError("--path-map plans a direct run; this request routes to AutoML", where="--path-map",
                             fix="add --automl-policy off, or render the study for the node with `skillbank submit --action automl --path-map ...`")
        log(f"route: automl ({decision.reason})")
        if decision.policy_source != "explicit":
            warning = bare_train_warning(args.spec, decision.policy_source, args.max_trials)
            log(f"warning: {warning}")
            args.handoff_notes = [f"warning: {warning}"]
        return _handoff_to_automl(args, loaded)
    if not decision.runnable:
        raise InputError(f"the router cannot run this request: {decision.reason}", where="--automl-policy", fix="pass --automl-policy off to train directly")
    _no_search_flags(args, decision.route)
    log(f"route: {decision.route} ({decision.reason})")
    resume_from = _resume_from(args, log)
    if resume_from is not None and paths:
        resume_from = Path(paths.to_remote(str(resume_from)))  # the TOML names the node's path
    preflight = _preflight(args, loaded, log)
    run_dir = Path(args.run_dir).expanduser() if args.run_dir else None
    if (args.log_dir or args.launcher_args) and args.backend != "cosmos-rl":
        raise InputError("--log-dir and --launcher-args are the cosmos-rl launcher's", where="--log-dir" if args.log_dir else "--launcher-args",
                         fix="drop them, or use --backend cosmos-rl")

    job = None
    if not args.dry_run:
        from skillbank.training.jobrecord import JobRecord

        job = JobRecord.start(action="train", backend=args.backend, spec_path=args.spec, argv=sys.argv, results_dir=spec.results_dir,
                              route=decision.to_dict(), train_output_dir=spec.train.output_dir)
        log(f"job record: {job.path}")
    from skillbank import procs

    with procs.stop_on_signals(), job.tracking() if job is not None else nullcontext():
        if not args.dry_run:
            spec = _refit(spec, job, log)
        if args.backend == "local":
            from skillbank.training.local.launch import train_local

            if paths:  # the plan reads this machine's files
                spec = TrainSpec.model_validate(paths.local(spec.model_dump(mode="json"), TrainSpec))
            result: Any = train_local(spec, spec_path=args.spec, resume=args.resume, dry_run=args.dry_run, job=job, log=log,
                                      stdout=sys.stderr if args.json else None, resume_from=resume_from, run_dir=run_dir)
        else:
            from skillbank.training.cosmos_rl.launch import train_cosmos_rl

            if paths:  # the TOML names the node's paths
                remote, notes = paths.remote(paths.local(spec.model_dump(mode="json"), TrainSpec), TrainSpec)
                spec = TrainSpec.model_validate(remote)
                for note in notes:
                    log(f"note: {note}")
            result = train_cosmos_rl(spec, spec_path=Path(args.spec), resume=args.resume, dry_run=args.dry_run, job=job, log=log,
                                     resume_from=resume_from, run_dir=run_dir, log_dir=Path(args.log_dir) if args.log_dir else None,
                                     launcher_args=shlex.split(args.launcher_args) if args.launcher_args else None,
                                     **({"paths": paths} if paths else {}))
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
