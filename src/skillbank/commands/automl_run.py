"""`skillbank automl` and the train command's AutoML handoff: settings, space, preflight gate, plan, study, outputs.

Nothing is created before the base spec passes preflight for the trials' backend, and a dry run
creates nothing at all: it prints the plan and the exact start and resume commands.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
from pathlib import Path
from typing import Any, get_args

from skillbank.automl.space import exclusive_apply, null_base_notes
from skillbank.errors import InputError, RunError
from skillbank.redaction import redact


def _settings(args: argparse.Namespace, base: dict[str, Any], out_dir: Path, study_name: str):
    from skillbank.automl.storage import check_url
    from skillbank.automl.study import StudySettings
    from skillbank.automl.trials import LOSS_METRICS
    from skillbank.specification.evaluate import MetricsSpec

    if args.max_trials < 1:
        raise InputError("--max-trials must be at least 1", where="--max-trials")
    if args.workers < 1:
        raise InputError("--workers must be at least 1", where="--workers")
    metrics = (*get_args(MetricsSpec.model_fields["primary"].annotation), *LOSS_METRICS)
    if args.metric not in metrics:
        raise InputError(f"unknown metric {args.metric!r}", where="--metric", fix=f"use one of: {', '.join(metrics)}")
    direction = args.direction or ("minimize" if args.metric in LOSS_METRICS else "maximize")
    storage = args.storage or f"sqlite:///{(out_dir / 'study.db').resolve()}"
    check_url(storage)  # a missing driver is refused here, before the preflight gate and any trial
    epochs = int(base["train"]["epoch"])
    return StudySettings(study_name=study_name, storage=storage,
                         algorithm=args.algorithm, max_trials=args.max_trials, direction=direction, seed=args.seed,
                         workers=args.workers, resume=args.resume, max_epochs=max(1, epochs), baseline=not args.no_baseline,
                         allow_spec_change=getattr(args, "allow_spec_change", False), keep=getattr(args, "keep", None))


def search_fingerprint(args: argparse.Namespace, space) -> dict[str, Any]:
    """What every worker joining a study must search alike (stored with the study, compared on join)."""
    return {"skill": args.skill, "algorithm": args.algorithm, "metric": args.metric, "backend": args.backend,
            "seed": args.seed, "baseline": not args.no_baseline, "space": [p.describe() for p in space.params],
            **({"fixed": space.left_out} if space.left_out else {})}


def preflight_gate(args: argparse.Namespace, shape: Any = None, loaded: Any = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """The base spec passes preflight for the trials' backend, or InputError (exit 2) naming the
    findings: a study on a spec that fails would only fail or prune every trial. Trials run on this
    machine, so its environment is checked too; a dry run lists environment findings instead
    ("check before starting"), as `skillbank train --dry-run` does. Returns (its summary, its stats)."""
    from skillbank.preflight.run import run_preflight

    runs_on = "node" if args.dry_run else "here"
    report = run_preflight(skill=args.skill, action="train", spec_path=args.spec, spec=loaded, backend=args.backend, runs_on=runs_on,
                           study=shape)  # env.disk: this worker's share of the study's disk (runs.disk.study_disk)
    report.require_ok(skill=args.skill, action="train", spec_path=args.spec, outcome="no study was created, no trial started")
    return report.summary(), report.stats


def command_line(args: argparse.Namespace, study_name: str, *, resume: bool, action: list[str] = (),
                 extra: list[str] = ()) -> str:
    """The `skillbank automl` command that starts (or resumes) this study, every choice spelled out.
    `action` / `extra`: what a prompt search adds (its --action and its --prompts / --holdout)."""
    argv = ["skillbank", "automl", *action, "--skill", args.skill, "--spec", str(Path(args.spec).resolve()), "--study", study_name,
            "--algorithm", args.algorithm, "--max-trials", str(args.max_trials), "--metric", args.metric]
    if not action:
        argv += ["--backend", args.backend]
    argv += list(extra)
    for key in args.param or []:
        argv += ["--param", key]
    for key, (low, high) in args.range:
        argv += ["--range", f"{key}={low:g}:{high:g}"]
    for key, values in args.choices:
        argv += ["--choices", f"{key}={','.join(values)}"]
    for key in getattr(args, "search", None) or []:
        argv += ["--search", key]
    for flag, value, default in (("--direction", args.direction, None), ("--storage", args.storage, None), ("--out", args.out, None),
                                 ("--workers", args.workers, 1), ("--seed", args.seed, 0)):
        if value != default:
            argv += [flag, redact(str(value))]
    if getattr(args, "keep", None):
        argv += ["--keep", args.keep]
    if args.no_baseline:
        argv.append("--no-baseline")
    if resume:
        argv.append("--resume")
    return shlex.join(argv)


def study_plan(args: argparse.Namespace, settings, space, out_dir: Path, base: dict[str, Any], preflight: dict[str, Any]) -> dict[str, Any]:
    """What a study would do (the dry run's output), nothing created: no folder, no storage, no process."""
    from skillbank.automl.storage import probe, socket_note

    db = out_dir / "study.db"
    check = probe(settings.storage, settings.study_name)
    exists = check["study_exists"]
    notes = []
    if exists and not args.resume:
        notes.append(f"study {settings.study_name} exists in the storage: starting joins it (the same search and base spec only); "
                     "--resume also runs its failed trials again")
    if check["answers"] is False:
        notes.append(f"the storage does not answer from this machine: {check['error']} (workers must reach it where they run)")
    if socket_note(settings.storage):
        notes.append(socket_note(settings.storage))
    notes += null_base_notes(args.skill, base, space)
    notes += list(getattr(args, "handoff_notes", None) or [])
    notes += [f"check before starting (trials run on this machine): {line}" for line in preflight.get("check_on_node", [])]
    return {
        "ok": True,
        "dry_run": True,
        "skill": args.skill,
        "spec": str(Path(args.spec).resolve()),
        "study": settings.study_name,
        "study_dir": str(out_dir.resolve()),
        "storage": redact(settings.storage),
        "storage_exists": db.is_file() if args.storage is None else exists,
        "storage_check": check,
        "backend": args.backend,
        "algorithm": settings.algorithm,
        "metric": {"name": args.metric, "direction": settings.direction},
        "max_trials": settings.max_trials,
        "baseline": settings.baseline,
        "workers": settings.workers,
        "epochs_per_trial": int(base["train"]["epoch"]),
        "resume": settings.resume,
        "search_space": [p.to_dict() for p in space.params],
        "fixed": space.fixed_list(),
        "skipped": dict(space.skipped),
        "preflight": preflight,
        "commands": {"start": command_line(args, settings.study_name, resume=False),
                     "resume": command_line(args, settings.study_name, resume=True)},
        "notes": notes,
    }


def study_fields(args: argparse.Namespace, model: Any, base: dict[str, Any], shape: Any, stats: dict[str, Any]) -> dict[str, Any]:
    """The study's time and disk in the dry run: planning.study's block on the preflight gate's counts (the figures
    `skillbank plan --trials N --workers K` prints for the same spec and search; the disk also the gate's env.disk)."""
    from skillbank import recipe
    from skillbank.automl.trials import LOSS_METRICS
    from skillbank.planning.plan import stats_setting
    from skillbank.planning.study import eval_set, study_block
    from skillbank.runs.disk import study_disk
    from skillbank.runs.steps import parallel_shape

    spec = model.model_validate(base)
    setting, _, _, why = stats_setting(spec, stats, backend=args.backend)  # an unknown hub id: the one refusal (models.params.unknown_model)
    counted = stats.get("plan") or {}
    if setting is None:
        disk = study_disk(spec, shape, records=counted.get("train_records"), backend=args.backend)
        block = {"study_time_h": None, "assumptions": [f"the study's time is unknown: {why}"], "disk": disk.to_dict() if disk else None}
        block["disk_gib_per_worker"] = block["disk"]["disk_gib_per_worker"] if disk else 0.0
        block["disk_gib_at_most"] = block["disk"]["disk_gib_at_most"] if disk else 0.0
    else:
        nodes, per_node = parallel_shape(spec)
        eval_records, eval_on = eval_set(spec, counted.get("annotated_records"), (counted.get("validation") or {}).get("records"))
        block = study_block(setting, nodes, per_node, shape, records=counted.get("train_records"), eval_records=eval_records, eval_on=eval_on,
                            answer_type=recipe.answer_type_of(base["custom"]), evaluates=args.metric not in LOSS_METRICS)
    d = block["disk"] or {}
    return {"study_time_h": block["study_time_h"], "disk_gib_per_worker": block["disk_gib_per_worker"], "disk_gib_at_most": block["disk_gib_at_most"],
            "disk_gib": block["disk_gib_at_most"], "disk": d, "study_plan": block}


def plan_lines(plan: dict[str, Any]) -> list[str]:
    from skillbank.preflight.report import gate_lines
    from skillbank.runs.steps import gib_value_text

    metric = plan["metric"]
    check = plan["storage_check"]
    if not check["checked"]:
        exists = "not created yet"  # the first worker creates it
    elif check["answers"]:
        held = ", ".join(f"{n} {state.lower()}" for state, n in sorted(check["trials"].items())) or "no trials"
        study = f"study {plan['study']} exists ({held})" if check["study_exists"] else f"study {plan['study']} not created yet"
        exists = f"answers: {check['server']} {check['version'] or ''}".rstrip() + f"; {study}"
    else:
        exists = f"does NOT answer from here: {check['error']}"
    return [
        "automl plan (dry run: nothing created, nothing started)",
        f"  study      : {plan['study']} in {plan['study_dir']}",
        f"  storage    : {plan['storage']} ({exists})",
        f"  backend    : {plan['backend']} (each trial: skillbank train --automl-policy off --backend {plan['backend']})",
        f"  algorithm  : {plan['algorithm']}; metric {metric['name']} ({metric['direction']})",
        f"  trials     : {plan['max_trials']} finished (complete or pruned), "
        f"{'baseline first, ' if plan['baseline'] else ''}{plan['workers']} at a time, " + _epochs(plan),
        *(f"  search     : {p['describe']}" for p in plan["search_space"]),
        *(f"  fixed      : {f['describe']}" for f in plan["fixed"]),
        *(f"  skip       : {key}: {why}" for key, why in plan["skipped"].items()),
        *gate_lines(plan["preflight"]),
        *([f"  time       : {plan['study_time_h']:,.2f} h for the study ({'; '.join(plan['study_plan']['assumptions'])})"]
          if plan.get("study_time_h") is not None else []),
        *([f"  disk       : {gib_value_text(plan['disk_gib_per_worker'])} per worker, {gib_value_text(plan['disk_gib_at_most'])} at most "
           f"({plan['disk']['detail']})"]
          if plan.get("disk") else []),
        f"  start      : {plan['commands']['start']}",
        f"  resume     : {plan['commands']['resume']}",
        *(f"  note       : {n}" for n in plan["notes"]),
    ]


def _epochs(plan: dict[str, Any]) -> str:
    searched = any(p["key"] == "train.epoch" for p in plan["search_space"])
    return f"train.epoch searched (the baseline trains {plan['epochs_per_trial']})" if searched else f"{plan['epochs_per_trial']} epoch(s) each"


def run_automl(args: argparse.Namespace, loaded: Any = None) -> int:
    """A study on the base spec (`loaded`: the LoadedSpec train's handoff read already; else the file is read once here)."""
    from skillbank.automl.space import build_space, load_schema
    from skillbank.commands.automl_control import study_location
    from skillbank.runs.disk import DEFAULT_KEEP, study_shape
    from skillbank.skillinfo import schema_path
    from skillbank.specification.io import LoadedSpec
    from skillbank.specification.registry import spec_model

    for flag, value in (("--prompts", getattr(args, "prompts", None)), ("--holdout", getattr(args, "holdout", None))):
        if value:
            raise InputError(f"{flag} belongs to the prompt search", where=flag, fix="add --action evaluate and pass an evaluate spec")
    model = spec_model(args.skill, "train")
    loaded = loaded or LoadedSpec.read(args.spec)
    base = loaded.model(model).model_dump(mode="json")
    schema = load_schema(schema_path(args.skill, "train"))
    space = build_space(schema, base, params=args.param, ranges=dict(args.range), choices=dict(args.choices), search=args.search)
    if args.algorithm == "grid":
        from skillbank.automl.study import grid_points

        grid_points(space)  # a range in the space fails here, before anything is written
    study_name, out_dir, _ = study_location(args, base["results_dir"])
    settings = _settings(args, base, out_dir, study_name)  # bad flags fail before anything is written
    settings.search = search_fingerprint(args, space)
    from skillbank.automl.fingerprint import normalized

    settings.base_spec = normalized(base)
    if settings.algorithm in ("hyperband", "asha") and "train.epoch" in space.keys():
        settings.max_epochs = int(max(p.high for p in space.params if p.key == "train.epoch"))
    shape = study_shape(args.max_trials, int(base["train"]["epoch"]), space.params, workers=args.workers, keep=args.keep or DEFAULT_KEEP)
    preflight, stats = preflight_gate(args, shape, loaded)
    if args.dry_run:
        plan = study_plan(args, settings, space, out_dir, base, preflight)
        plan.update(study_fields(args, model, base, shape, stats))
        if args.json:
            print(json.dumps(plan, indent=2))
        else:
            print("\n".join(plan_lines(plan)))
        return 0
    from skillbank import procs

    with procs.stop_on_signals():
        return _run_study(args, settings, space, base, out_dir, apply=exclusive_apply(model))


def _run_study(args: argparse.Namespace, settings, space, base: dict[str, Any], out_dir: Path, apply=None) -> int:
    from tqdm import tqdm

    from skillbank.automl.report import write_outputs
    from skillbank.automl.study import unretried_failures
    from skillbank.automl.worker import run_study
    from skillbank.automl.trials import make_check, make_runner

    from skillbank import procs

    out_dir.mkdir(parents=True, exist_ok=True)
    log = sys.stderr
    left = procs.stop_leftovers(out_dir / "trials")  # a dead worker's trainers on this machine (pid files)
    if left:
        print(f"automl: stopped {len(left)} process(es) a dead worker left running (pids {', '.join(map(str, left))})", file=log)
    print(f"automl: study {settings.study_name} ({settings.algorithm}, {settings.max_trials} trials, metric {args.metric} "
          f"{settings.direction}, backend {args.backend}) in {out_dir}", file=log)
    for param in space.params:
        print(f"  search {param.describe()}", file=log)
    for fixed in space.fixed_list():
        print(f"  fixed  {fixed['describe']}", file=log)
    for key, why in space.skipped.items():
        print(f"  skip   {key}: {why}", file=log)
    for note in null_base_notes(args.skill, base, space):
        print(f"  note   {note}", file=log)
    bar = tqdm(total=settings.max_trials, desc="trials", unit="trial", file=log, disable=None)

    def progress(trial: Any) -> None:
        if trial.state.name != "FAIL":  # failed trials do not count toward --max-trials
            bar.update(1)
        bar.set_postfix_str(f"#{trial.number} {trial.state.name} {trial.value if trial.value is not None else ''}")

    threads = max(1, (os.cpu_count() or 1) // settings.workers) if settings.workers > 1 else None  # K trials share the cores
    runner = make_runner(metric=args.metric, backend=args.backend, maximize=settings.direction == "maximize", threads=threads)
    try:
        study = run_study(settings, space, base, out_dir / "trials", runner, check=make_check(args.skill, args.backend, searched=space.keys()),
                          progress=progress, apply=apply)
    finally:
        bar.close()
    if procs.stop_signal() is not None:  # a signalled worker ends at once (Slurm SIGKILLs after KillWait): one line
        return stopped(args, study, settings, {})
    rec = write_outputs(study, skill=args.skill, algorithm=settings.algorithm, metric=args.metric,
                        storage=settings.storage, out_dir=out_dir)
    if procs.stop_requested():  # a stop is not a failure: one line, the documented exit code
        return stopped(args, study, settings, rec)
    if not rec:
        raise RunError(f"no trial completed: see {out_dir / 'trials.parquet'} for each trial's reason "
                       f"(failed trials run again with: {command_line(args, settings.study_name, resume=True)})")
    if args.json:
        print(json.dumps(rec, indent=2))
    else:
        base_value = (rec.get("baseline") or {}).get("metric_value")
        print(f"best {args.metric} {rec['metric']['value']:.4f} (trial {rec['trial_number']}), "
              f"baseline {base_value if base_value is not None else 'n/a'}; trial-epochs {rec['trials']['trial_epochs']}")
        print(f"best params: {json.dumps(rec['best_params'])}")
        failed = unretried_failures(study)
        if failed:
            print(f"{len(failed)} trial(s) failed (environment, crash or stop; see fail_reason in trials.parquet): "
                  f"run them again with {command_line(args, settings.study_name, resume=True)}")
        print(f"wrote {out_dir / 'best_rec.json'}, {out_dir / 'trials.parquet'}, {out_dir / 'history.png'}")
    return 0


def stopped(args: argparse.Namespace, study, settings, rec: dict[str, Any], resume: str | None = None) -> int:
    """How a stopped worker ends: one line naming this worker's stopped trials (and their retries).
    SIGTERM / SIGINT: Interrupted (the CLI prints the line, exits 128 + the signal), no outputs rewritten
    (the storage holds the study: --status; the next worker to end rewrites them); --stop-study: 0."""
    from skillbank import procs
    from skillbank.automl.worker import stop_line

    resume = resume or command_line(args, settings.study_name, resume=True)
    signum = procs.stop_signal()
    line = stop_line(study, worker=signum is not None, resume=resume)
    if signum is not None:
        raise procs.Interrupted(signum, line)
    print(line, file=sys.stderr)
    if args.json:
        print(json.dumps({"ok": True, "stopped": "study", "best_rec": rec or None}, indent=2))
    return 0


HANDOFF = ("backend", "max_trials", "algorithm", "param", "range", "choices", "search", "study", "resume", "dry_run", "json")


def run_from_train(args: argparse.Namespace, loaded: Any = None) -> int:
    """The router sent a train request here (automl_policy auto): a study on its spec (`loaded`: the spec
    train read), narrowed by the search flags train shares with `skillbank automl`; everything else at automl's defaults."""
    from skillbank.commands.flags import add_automl_arguments

    parser = argparse.ArgumentParser()
    add_automl_arguments(parser)
    automl_args = parser.parse_args(["--spec", str(args.spec)])
    for name in HANDOFF:
        setattr(automl_args, name, getattr(args, name))
    automl_args.handoff_notes = getattr(args, "handoff_notes", [])  # train's warnings, into the dry run's notes
    return run_automl(automl_args, loaded)
