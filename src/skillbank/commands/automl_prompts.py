"""`skillbank automl --action evaluate` (prompt search): its flags checked, the preflight gate, the plan and the run.

The search itself (the space, the trials' evaluations with the model loaded once, best_rec.json) is
skillbank.automl.prompts; this module ties it to the command line, preflight and the study.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from skillbank.automl.prompts import (EVAL_METRICS, TRAIN_ONLY, EvalSession, SearchRun, _describe, apply_values, build_prompt_space,
                                      holdout_spec, make_eval_runner, parse_holdout, plan_lines, system_turn_notes, write_outputs)
from skillbank.errors import InputError, RunError
from skillbank.redaction import redact


def _check_flags(args: argparse.Namespace) -> None:
    if args.metric not in EVAL_METRICS:
        raise InputError(f"--metric {args.metric} is not an evaluation metric", where="--metric", fix=f"use one of: {', '.join(EVAL_METRICS)}")
    if args.algorithm in TRAIN_ONLY:
        raise InputError(f"{args.algorithm} prunes trials by training epoch; an evaluation has none", where="--algorithm",
                         fix="use grid, bayesian or random")
    if args.search:
        raise InputError("--search searches a key a train spec fixes (its user_set); an evaluate spec fixes none", where="--search",
                         fix="name the evaluate keys with --param, --range or --choices")
    if args.workers != 1:
        raise InputError("a prompt search evaluates one trial at a time with the model it loaded once", where="--workers",
                         fix="drop --workers; to share the work, start another process on the same --storage with --resume")


def pick_algorithm(args: argparse.Namespace, space) -> str:
    """bayesian (the default) over lists of choices only is the grid: each combination once, in order."""
    from skillbank.automl import DEFAULT_ALGORITHM

    if args.algorithm == DEFAULT_ALGORITHM and all(p.kind in ("categorical", "bool") for p in space.params):
        return "grid"
    return args.algorithm


def preflight_gate(args: argparse.Namespace, base: dict[str, Any], holdout: tuple[str, str] | None) -> dict[str, Any]:
    """The base spec (and the held-out set in its place) pass evaluate's preflight, or exit 2, nothing created."""
    from skillbank.preflight.run import run_preflight

    runs_on = "node" if args.dry_run else "here"
    report = run_preflight(skill=args.skill, action="evaluate", spec_path=args.spec, runs_on=runs_on)
    report.require_ok(skill=args.skill, action="evaluate", spec_path=args.spec, outcome="no study was created, no trial started")
    summary = report.summary()
    if holdout is not None:
        held = run_preflight(skill=args.skill, action="evaluate", spec=holdout_spec(base, holdout), runs_on=runs_on, only=["spec", "data"])
        try:
            held.require_ok(skill=args.skill, action="evaluate", spec_path=args.spec, outcome="no study was created, no trial started")
        except InputError as exc:  # the held-out set in the base spec's place: name the flag, not the spec
            raise InputError(exc.message, where=f"--holdout {args.holdout}",
                             fix="check the held-out annotations, and name the folder their media paths are relative to: --holdout ANNOTATIONS:MEDIA") from None
        summary["holdout"] = held.summary()
    return summary


def command_line(args: argparse.Namespace, study_name: str, *, resume: bool) -> str:
    """The prompt search's start / resume command (training AutoML's builder with --action evaluate)."""
    from skillbank.commands.automl_run import command_line as automl_command_line

    extra = ["--prompts", str(Path(args.prompts).resolve())] if args.prompts else []
    if args.holdout:
        annotation, media = parse_holdout(args.holdout)
        extra += ["--holdout", str(Path(annotation).resolve()) + (f":{Path(media).resolve()}" if media else "")]
    return automl_command_line(args, study_name, resume=resume, action=["--action", "evaluate"], extra=extra)


def study_plan(args, settings, space, out_dir: Path, holdout, preflight: dict[str, Any], warnings: list[str]) -> dict[str, Any]:
    from skillbank.automl.study import grid_points

    db = out_dir / "study.db"
    exists = db.is_file() if args.storage is None else None
    notes = [f"{db} exists: starting joins that study (the same search only); --resume also runs its failed trials again"] if exists and not args.resume else []
    notes += [f"warning: {w}" for w in warnings]
    if settings.algorithm == "grid":
        points = len(grid_points(space))
        notes.append(f"grid: {points} combination(s), each evaluated once" +
                     (f"; --max-trials {args.max_trials} runs the first {settings.max_trials}" if points > settings.max_trials else ""))
    notes += list(space.skipped.values())
    return {
        "ok": True, "dry_run": True, "action": "evaluate", "skill": args.skill, "spec": str(Path(args.spec).resolve()),
        "study": settings.study_name, "study_dir": str(out_dir.resolve()), "storage": redact(settings.storage), "storage_exists": exists,
        "algorithm": settings.algorithm, "metric": {"name": args.metric, "direction": settings.direction},
        "max_trials": settings.max_trials, "baseline": settings.baseline, "resume": settings.resume,
        "proxy": {"annotation_path": args.proxy[0], "media_dir": args.proxy[1]},
        "holdout": None if holdout is None else {"annotation_path": holdout[0], "media_dir": holdout[1]},
        "search_space": [p.to_dict() for p in space.params], "preflight": preflight,
        "commands": {"start": command_line(args, settings.study_name, resume=False), "resume": command_line(args, settings.study_name, resume=True)},
        "notes": notes,
    }


def run_prompt_search(args: argparse.Namespace) -> int:
    from skillbank.automl.space import load_schema
    from skillbank.automl.storage import check_url
    from skillbank.automl.study import StudySettings
    from skillbank.skillinfo import schema_path
    from skillbank.specification.evaluate import EvaluateSpec
    from skillbank.specification.io import load_spec

    _check_flags(args)
    base = load_spec(args.spec, EvaluateSpec).model_dump(mode="json")
    base["metrics"]["primary"] = args.metric
    args.proxy = (base["dataset"]["annotation_path"], base["dataset"]["media_dir"])
    holdout = parse_holdout(args.holdout) if args.holdout else None
    space = build_prompt_space(base, load_schema(schema_path(args.skill, "evaluate")), params=args.param, ranges=dict(args.range),
                               choices=dict(args.choices), prompts=args.prompts, baseline=not args.no_baseline)
    algorithm = pick_algorithm(args, space)
    if args.max_trials < 1:
        raise InputError("--max-trials must be at least 1", where="--max-trials")
    max_trials = args.max_trials
    if algorithm == "grid":  # a range in the space fails here, before anything is written
        from skillbank.automl.study import grid_points

        max_trials = min(max_trials, len(grid_points(space)))
    study_name = args.study or Path(args.spec).stem
    out_dir = Path(args.out) if args.out else Path(base["results_dir"]) / "automl" / study_name
    settings = StudySettings(study_name=study_name, storage=args.storage or f"sqlite:///{(out_dir / 'study.db').resolve()}",
                             algorithm=algorithm, max_trials=max_trials, direction=args.direction or "maximize",
                             seed=args.seed, workers=1, resume=args.resume, max_epochs=1, baseline=not args.no_baseline,
                             allow_spec_change=args.allow_spec_change)
    check_url(settings.storage)  # a missing driver: exit 2 before the preflight gate and any trial
    args.algorithm = algorithm  # the start / resume commands name what runs
    preflight = preflight_gate(args, base, holdout)
    warnings, args.system_turns = system_turn_notes(args.proxy[0], base, holdout, space)
    if args.dry_run:
        plan = study_plan(args, settings, space, out_dir, holdout, preflight, warnings)
        print(json.dumps(plan, indent=2) if args.json else "\n".join(plan_lines(plan)))
        return 0
    from skillbank import procs

    from skillbank.automl.fingerprint import normalized

    settings.base_spec = normalized(base)  # a worker joining with another evaluate spec is refused (--allow-spec-change)
    with procs.stop_on_signals():
        return _run(args, settings, space, base, out_dir, holdout, warnings)


def _run(args, settings, space, base: dict[str, Any], out_dir: Path, holdout, warnings: list[str]) -> int:
    from tqdm import tqdm

    from skillbank.automl.study import unretried_failures
    from skillbank.automl.worker import run_study

    started = time.perf_counter()
    out_dir.mkdir(parents=True, exist_ok=True)
    log = sys.stderr
    print(f"automl: prompt search {settings.study_name} ({settings.algorithm}, {settings.max_trials} trials, metric {args.metric} "
          f"on {args.proxy[0]}) in {out_dir}", file=log)
    for p in space.params:
        print(f"  search {_describe(p.to_dict())}", file=log)
    for w in warnings:
        print(f"automl: warning: {w}", file=log)
    bar = tqdm(total=settings.max_trials, desc="trials", unit="trial", file=log, disable=None)

    def progress(trial: Any) -> None:
        if trial.state.name != "FAIL":
            bar.update(1)
        bar.set_postfix_str(f"#{trial.number} {trial.state.name} {trial.value if trial.value is not None else ''}")

    session = EvalSession()
    try:
        study = run_study(settings, space, base, out_dir / "trials", make_eval_runner(session), progress=progress, apply=apply_values)
    finally:
        bar.close()
    from skillbank import procs

    run = SearchRun(args.skill, args.metric, args.proxy, holdout, args.system_turns, started)
    rec = write_outputs(study, settings, session, out_dir, run) if procs.stop_signal() is None else {}
    if procs.stop_requested():  # a stop is not a failure: one line, the documented exit code (commands.automl_run.stopped)
        from skillbank.commands.automl_run import stopped

        return stopped(args, study, settings, rec, resume=command_line(args, settings.study_name, resume=True))
    if not rec:
        raise RunError(f"no trial completed: see {out_dir / 'trials.parquet'} for each trial's reason "
                       f"(failed trials run again with: {command_line(args, settings.study_name, resume=True)})")
    if args.json:
        print(json.dumps(rec, indent=2))
        return 0
    base_value = (rec.get("baseline") or {}).get("metric_value")
    print(f"best {args.metric} {rec['metric']['value']:.4f} on the proxy set (trial {rec['trial_number']}), "
          f"baseline {base_value if base_value is not None else 'n/a'}")
    if len(rec["tied_trials"]) > 1:
        print(f"{len(rec['tied_trials'])} trials tie at the best value (trials {', '.join(map(str, rec['tied_trials']))}): the earliest "
              "is reported; the proxy set does not tell them apart")
    held = rec["holdout"]
    if held:
        print(f"held-out {args.metric}: best {held['metric_value']:.4f}, baseline "
              f"{held['baseline_metric_value'] if held['baseline_metric_value'] is not None else 'n/a'} ({held['records']} records)")
    print(f"best params: {json.dumps(rec['best_params'])}")
    cost = rec["cost"]
    print(f"cost (this run): {cost['evaluations']} evaluation(s) of {cost['samples']} sample(s) in {cost['evaluate_s']:.1f}s, "
          f"model loaded {cost['model_loads']}x, {cost['wall_s']:.1f}s wall")
    failed = unretried_failures(study)
    if failed:
        print(f"{len(failed)} trial(s) failed (see fail_reason in trials.parquet): run them again with "
              f"{command_line(args, settings.study_name, resume=True)}")
    print(f"wrote {out_dir / 'best_rec.json'}, {out_dir / 'trials.parquet'}, {out_dir / 'history.png'}")
    return 0
