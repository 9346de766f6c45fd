"""`skillbank rl`: GRPO after SFT (the rl action): the cosmos-rl TOML and launch command, or a run on this machine (--backend local)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from skillbank.commands.flags import (add_backend, add_dry_run, add_gpus_per_node, add_json, add_model_family,
                                      add_spec, add_start_check, command_parser, start_check_mode, DEFAULT_SKILL)
from skillbank.errors import InputError
from skillbank.training.backends import DEFAULT_BACKEND

SKILL = DEFAULT_SKILL  # the skill whose action this command runs
FIND_SCRIPT = 'import importlib.util as u; print(u.find_spec("skillbank.training.cosmos_rl.grpo_script").origin)'  # where the node has it
DESCRIPTION = """\
Reinforcement learning (GRPO) after SFT, from an rl spec
(skillbank spec --skill tao-finetune-cosmos-reason --action rl --set start=<SFT run>/safetensors/step_N ...).

--backend cosmos-rl (default; production, GPUs): preflight (spec and data must pass; GPUs, redis-server
and the token are listed as "check on the node"), then a run folder <train.output_dir>/<YYYYmmddHHMMSS>/
with cosmos_rl.toml, and the command that launches it on the training machine:

  cosmos-rl --config <run>/cosmos_rl.toml --log-dir <run>/logs <skillbank>/training/cosmos_rl/grpo_script.py

Nothing is launched, unless --launch: then cosmos-rl starts here on that TOML (or on --toml, the one a job
folder holds) under skillbank's log watcher, as an rl job does (a Slurm job's node 0, a local or Docker job): the
run folder gets metrics.jsonl (one row per policy step: step, total_steps, loss, reward_mean, reward_std,
reward_max, reward_min, kl, response_length, entropy, lr, grad_norm, iteration_time, time; read from the
controller's step lines, which need "console" in logging.logger), tensorboard/, the recipe in every export
(skillbank_recipe.json), result.json (status, reason, last_step, total_steps, last_loss, last_reward_mean,
final_safetensors, checkpoints, warnings) and a copy of the TOML (cosmos_rl.toml); a job record follows it.
hf_model://owner/repo is written as the bare id (cosmos-rl downloads it).
A checkpoint that only the training machine has (a path that does not exist here) is written as
given, its family (which sets the data packer and the pixels per token) from --model-family, or from
its config.json read at LOCAL with --path-map LOCAL=REMOTE, or from its name (Cosmos-Reason2, Qwen3-VL,
...); the model check is then "check on the node". With --path-map every path in the TOML and the
command is REMOTE, the prompts are read at LOCAL, and the run folder is created at LOCAL.
To run it as a job (Slurm, Docker, this machine): skillbank submit --action rl --spec rl.yaml ...

--backend local (this machine, CPU or one GPU): preflight, then GRPO in one process whose policy samples
its own rollouts: train_batch_per_replica / rollout.n_generation prompts per policy step (the batch must
be a multiple of n_generation), n_generation samples each at train_policy.temperature, the rewards,
group-normalised advantages, cosmos-rl's clipped token-mean loss with kl_beta x KL to the starting
weights, one optimizer step per policy step. A progress bar shows reward and KL; metrics.jsonl has
reward_mean, reward_<name>, correct, kl, response_length, samples_per_s per step; a job record lands in
<results_dir>/jobs/. --dry-run prints the plan and creates nothing; --resume continues the newest run.

Both backends write checkpoints to <run>/checkpoints/step_N and exports to <run>/safetensors/step_N
(evaluate reads those).

Start check (both backends): when the start model is a local folder and torch is installed, a few
prompts are sampled from it, rollout.n_generation samples each, with the local GRPO code and rewards;
when every group's rewards are equal (their advantages are 0: nothing to learn) a warning names the
share of such groups, and the run is "prepared, with a warning": the first line names the finding and
its fix ("headline" and "learning_warnings" in --json; --backend local: "learning_warnings", and its
last line repeats the warning); the exit code stays 0. Bounded by default (--start-check bounded: a
few prompts, a token cap and a time cap, the figures in its help; a group with a sample cut before it
ended is undecided, never flat); --start-check full samples to the run's length without a time cap;
--no-start-check (--start-check off) skips it. One line says what was sampled and how long it took
("start_check" in --json). A model that does not fit the free memory, or one over 2B parameters where
no GPU is visible, is not loaded: the line says why.

examples:
  skillbank rl --spec rl.yaml                                   # cosmos-rl: the TOML and the launch command
  skillbank rl --spec rl.yaml --backend local --dry-run         # local: the plan only
  skillbank rl --spec rl.yaml --backend local                   # local: train
  skillbank rl --spec rl.yaml --path-map /home/me=/lustre/me --model-family qwen3_vl   # the node's TOML
  skillbank evaluate --run <train.output_dir>                   # then: every export of the newest run
"""


def register(sub: argparse._SubParsersAction) -> None:
    p = command_parser(sub, "rl", DESCRIPTION)
    add_spec(p, "rl spec file (YAML or JSON)", required=True)
    add_backend(p, f"cosmos-rl: prepare the TOML and print the launch command (GPUs); local: run GRPO here, CPU or one GPU (default: {DEFAULT_BACKEND})", default=DEFAULT_BACKEND)
    add_gpus_per_node(p, "GPUs the training machine has (policy + rollout GPUs must fit; cosmos-rl)")
    add_dry_run(p, "local: print the plan (steps, prompts per step, run folder) and create nothing")
    launch = p.add_argument_group("cosmos-rl: launch here, under skillbank's log watcher (what an rl job runs)")
    launch.add_argument("--launch", action="store_true", help="cosmos-rl: start the run here and watch it to the end (metrics.jsonl, "
                        "tensorboard/, result.json, the recipe in every export, a job record); exit 1 when the logs say it failed")
    launch.add_argument("--toml", metavar="TOML", default=None, help="with --launch: the GRPO TOML to run (a job folder's cosmos-rl.toml or "
                        "cosmos-rl-resume.toml); its train.output_dir is the run folder; no preflight (the job's first step checked the node)")
    from skillbank.commands.flags import add_launcher_flags
    add_launcher_flags(launch)
    p.add_argument("--resume", action="store_true", help="local: continue the newest run of train.output_dir from its newest complete checkpoint")
    from skillbank.commands.flags import add_path_map
    add_path_map(p)
    add_model_family(p, "cosmos-rl: the family of a starting checkpoint this machine cannot read (default: its config.json here, else its name)")
    add_start_check(p, "the GRPO start check: when the start model is a local folder and torch is installed, a few prompts are sampled "
                        "from it (rollout.n_generation samples each) and scored, and a warning says when every group's rewards are equal "
                        "(GRPO would learn nothing)")
    add_json(p, "print one JSON object (progress goes to stderr)")
    p.set_defaults(run=run)


LEARNS_NOTHING = ("spec.start_rewards",)  # warnings that say the run as prepared learns nothing: they qualify "prepared"


def learning_warnings(findings: Any) -> list[dict[str, str]]:
    """The preflight warnings that say GRPO learns nothing from the start (the start check's flat rewards), each
    {check, where, message, fix}: a run prepared with one is not a clean success, so the output says so up front."""
    return [{"check": f.check, "where": f.where, "message": f.message, "fix": f.fix} for f in findings if f.check in LEARNS_NOTHING]


def headline(learning: list[dict[str, str]]) -> str:
    """The line that says the run is prepared, and with what warning when GRPO would learn nothing from its start."""
    if not learning:
        return "GRPO run prepared (nothing launched)"
    first = learning[0]
    return f"GRPO run prepared, with a warning (nothing launched): {first['message']}; fix: {first['fix']}"


def node_specs(loaded: Any, paths: Any) -> tuple[Any, Any, list[str]]:
    """(this machine's view, the node's view, notes) of an rl spec under a path map (the same spec twice without one)."""
    from skillbank.specification.rl import RlSpec

    if not paths:
        spec = loaded.model(RlSpec)
        return spec, spec, []
    from skillbank.specification.validation import validate

    local = paths.local(loaded.raw(), RlSpec)
    paths.check_used(local, RlSpec)
    remote, notes = paths.remote(local, RlSpec)
    return validate(RlSpec, local, source=loaded.path), validate(RlSpec, remote, source=loaded.path), notes


def prepare(loaded: Any, *, gpus_per_node: int | None = None, paths: Any = None, model_family: str | None = None,
            start_check: str = "bounded", runs_on: str = "node") -> dict[str, Any]:
    """Preflight, then the run folder and its TOML of the rl spec read once (a LoadedSpec); returns what the command prints."""
    from skillbank.preflight.run import run_preflight
    from skillbank.specification.pathmap import PathMap
    from skillbank.training.cosmos_rl.family import node_family
    from skillbank.training.cosmos_rl.grpo import build_grpo_toml
    from skillbank.training.cosmos_rl.launch import GRPO_SCRIPT, RunLayout, resolve_model
    from skillbank.training.cosmos_rl.toml import write_toml

    paths = paths or PathMap()
    here, spec, path_notes = node_specs(loaded, paths)
    report = run_preflight(skill=SKILL, action="rl", spec=loaded, gpus_per_node=gpus_per_node, runs_on=runs_on, start_check=start_check,
                           **({"paths": paths} if paths else {}))
    report.require_ok(skill=SKILL, action="rl", spec_path=loaded.path)
    model, notes = resolve_model(spec.policy.model_name_or_path, dry_run=True)
    family = node_family(model, here=paths.to_local(model) if model.startswith("/") else None, given=model_family)
    try:
        created = RunLayout.new(here.train.output_dir)  # the run folder, at LOCAL under a path map
    except OSError as exc:
        raise InputError(f"cannot create the run folder under train.output_dir {here.train.output_dir} here ({exc.strerror or exc})",
                         where="train.output_dir", fix="map it to a folder of this machine with --path-map LOCAL=REMOTE, or set train.output_dir to one") from None
    layout = RunLayout(created.run_id, Path(paths.to_remote(created.run_dir)) if paths else created.run_dir, created.run_dir)
    built = build_grpo_toml(spec, model=model, family=family, run_dir=layout.run_dir, run_id=layout.run_id)
    write_toml(layout.toml_path, built.data)
    script: Any = GRPO_SCRIPT
    if paths:  # the node's copy of the script: through the map, else looked up by the node's python
        script = paths.to_remote(script) if paths.covered(script) else f"$(python -c '{FIND_SCRIPT}')"
    node_toml = paths.to_remote(layout.toml_path) if paths else str(layout.toml_path)
    summary = report.summary()
    learning = learning_warnings(report.warnings)
    return {
        "ok": True,
        "headline": headline(learning),
        "run_dir": str(layout.run_dir),
        "toml": str(layout.toml_path),
        "command": ["cosmos-rl", "--config", node_toml, "--log-dir", str(layout.log_dir), str(script)],
        "model": model,
        "family": family.model_type,
        "gpus": {"policy": built.policy_gpus, "rollout": built.rollout_gpus, "total": built.gpus},
        "rewards": dict(spec.train.train_policy.reward_function),
        "plan": report.stats.get("rl_plan"),
        "start_check": report.stats.get("start_check"),
        "warnings": [f"{f.where}: {f.message}" for f in report.warnings],
        "learning_warnings": learning,  # the flat-reward finding of the start check, with its fix ([] when none)
        "check_on_node": summary["check_on_node"],
        "path_map": paths.items(),
        "notes": [*notes, *built.notes, *path_notes],
    }


def run_local(args: argparse.Namespace) -> int:
    """Preflight (spec, data, and this machine), then GRPO here with a job record."""
    from contextlib import nullcontext

    from skillbank import procs
    from skillbank.preflight.run import run_preflight
    from skillbank.specification.io import LoadedSpec
    from skillbank.specification.rl import RlSpec
    from skillbank.training.local.grpo_launch import rl_local

    log_stream = sys.stderr if args.json else sys.stdout

    def log(line: str) -> None:
        print(line, file=log_stream, flush=True)

    loaded = LoadedSpec.read(args.spec)
    spec = loaded.model(RlSpec)
    report = run_preflight(skill=SKILL, action="rl", spec=loaded, backend="local", runs_on="here",
                           start_check=start_check_mode(args))
    report.require_ok(skill=SKILL, action="rl", spec_path=args.spec)
    if report.stats.get("start_check"):
        from skillbank.training.local.grpo_start import line

        log(line(report.stats["start_check"]))
    for finding in report.warnings:
        log(f"preflight warning: {finding.where}: {finding.message}")
    job = None
    if not args.dry_run:
        from skillbank.training.jobrecord import JobRecord

        job = JobRecord.start(action="rl", backend="local", spec_path=args.spec, argv=sys.argv, results_dir=spec.results_dir)
        log(f"job record: {job.path}")
    with procs.stop_on_signals(), job.tracking() if job is not None else nullcontext():
        result = rl_local(spec, resume=args.resume, dry_run=args.dry_run, job=job, log=log, stdout=sys.stderr if args.json else None)
    learning = learning_warnings(report.warnings)
    if args.json:
        print(json.dumps({"ok": True, "backend": "local", "dry_run": args.dry_run, "job_record": str(job.path) if job else None,
                          "warnings": [f"{f.where}: {f.message}" for f in report.warnings], "learning_warnings": learning,
                          "start_check": report.stats.get("start_check"), "result": result}, default=str))
    for w in learning:  # the last word, after the plan or the run's finished line
        log(f"warning: {w['message']}; fix: {w['fix']}")
    return 0


def run_launch(args: argparse.Namespace) -> int:
    """--launch: cosmos-rl here on --toml (a job's), or on the TOML prepared from the spec, under the log watcher, with a job record."""
    import shlex

    from skillbank import procs
    from skillbank.runs.progress import read_result
    from skillbank.specification.io import LoadedSpec
    from skillbank.specification.rl import RlSpec
    from skillbank.training.cosmos_rl.grpo_launch import launch_grpo, read_grpo_toml
    from skillbank.training.jobrecord import JobRecord

    log_stream = sys.stderr if args.json else sys.stdout

    def log(line: str) -> None:
        print(line, file=log_stream, flush=True)

    loaded = LoadedSpec.read(args.spec)
    if args.toml:
        toml = Path(args.toml)
        read_grpo_toml(toml)  # bad input before a record is written
    else:
        prepared = prepare(loaded, gpus_per_node=args.gpus_per_node, model_family=args.model_family, start_check=start_check_mode(args), runs_on="here")
        log(prepared["headline"].replace(" (nothing launched)", ""))
        toml = Path(prepared["toml"])
    job = JobRecord.start(action="rl", backend="cosmos-rl", spec_path=args.spec, argv=sys.argv, results_dir=loaded.model(RlSpec).results_dir)
    log(f"job record: {job.path}")
    with procs.stop_on_signals(), job.tracking():
        launch_grpo(toml, log_dir=Path(args.log_dir) if args.log_dir else None,
                    launcher_args=shlex.split(args.launcher_args) if args.launcher_args else None, job=job, log=log)
    if args.json:
        run_dir = read_grpo_toml(toml)[1]["train"]["output_dir"]
        print(json.dumps({"ok": True, "backend": "cosmos-rl", "launched": True, "job_record": str(job.path), "run_dir": str(Path(run_dir).resolve()),
                          "result": read_result(Path(run_dir).resolve())}, default=str))
    return 0


def run(args: argparse.Namespace) -> int:
    from skillbank.training.local.grpo_start import line

    given = [flag for flag, value in (("--toml", args.toml), ("--log-dir", args.log_dir), ("--launcher-args", args.launcher_args)) if value]
    if given and not args.launch:
        raise InputError(f"{given[0]} belongs to --launch", where=given[0], fix="add --launch (cosmos-rl: run it here), or drop the flag")
    if args.launch:
        if args.backend != "cosmos-rl" or args.path_map or args.dry_run or args.resume:
            flag = next(f for f, v in (("--backend local", args.backend != "cosmos-rl"), ("--path-map", args.path_map), ("--dry-run", args.dry_run),
                                       ("--resume", args.resume)) if v)
            raise InputError(f"--launch runs cosmos-rl here; {flag} does not go with it", where=flag,
                             fix="drop it (a requeued job resumes with --toml <job folder>/cosmos-rl-resume.toml; --backend local trains without --launch)")
        return run_launch(args)
    if args.backend == "local":
        given = [flag for flag, value in (("--path-map", args.path_map), ("--model-family", args.model_family)) if value]
        if given:
            raise InputError(f"{given[0]} prepares a cosmos-rl run for another machine; --backend local runs here", where=given[0],
                             fix="drop it, or use --backend cosmos-rl (or `skillbank submit --action rl --backend local --path-map ...`)")
        return run_local(args)
    if args.dry_run or args.resume:
        raise InputError("--dry-run and --resume belong to --backend local: with cosmos-rl, skillbank rl launches nothing "
                         "(it writes the TOML and prints the command; cosmos-rl resumes with train.resume in the TOML)",
                         where="--dry-run" if args.dry_run else "--resume", fix="drop the flag, or add --backend local")
    from skillbank.commands.flags import spec_and_paths

    loaded, paths = spec_and_paths(args.spec, args.path_map)  # read once: the path map it records, both views, preflight
    out = prepare(loaded, gpus_per_node=args.gpus_per_node, paths=paths, model_family=args.model_family, start_check=start_check_mode(args))
    if args.json:
        print(json.dumps(out))
        return 0
    gpus = out["gpus"]
    lines = [
        out["headline"],
        f"  run folder : {out['run_dir']}",
        f"  TOML       : {out['toml']}",
        f"  model      : {out['model']} ({out['family']})",
        f"  GPUs       : policy {gpus['policy']} + rollout {gpus['rollout']} = {gpus['total']}",
        f"  rewards    : {', '.join(f'{k} x {v:g}' for k, v in out['rewards'].items())}",
        *(f"  plan       : {k} {v}" for k, v in (out["plan"] or {}).items()),
        *([f"  {line(out['start_check'])}"] if out["start_check"] else []),
        *(f"  warning    : {w}" for w in out["warnings"]),
        *(f"  on node    : {c}" for c in out["check_on_node"]),
        *(f"  note       : {n}" for n in out["notes"]),
        "launch on the training machine:",
        "  " + " ".join(out["command"]),
    ]
    print("\n".join(lines))
    return 0
