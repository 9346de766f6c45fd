"""`skillbank automl` and the train command's AutoML handoff: settings, space, study, outputs."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, get_args

from skillbank.errors import InputError, RunError


def _settings(args: argparse.Namespace, base: dict[str, Any], out_dir: Path, study_name: str):
    from skillbank.automl.study import StudySettings
    from skillbank.automl.trials import LOSS_METRICS
    from skillbank.spec.evaluate import MetricsSpec

    if args.max_trials < 1:
        raise InputError("--max-trials must be at least 1", where="--max-trials")
    if args.workers < 1:
        raise InputError("--workers must be at least 1", where="--workers")
    metrics = (*get_args(MetricsSpec.model_fields["primary"].annotation), *LOSS_METRICS)
    if args.metric not in metrics:
        raise InputError(f"unknown metric {args.metric!r}", where="--metric", fix=f"use one of: {', '.join(metrics)}")
    direction = args.direction or ("minimize" if args.metric in LOSS_METRICS else "maximize")
    storage = args.storage or f"sqlite:///{(out_dir / 'study.db').resolve()}"
    epochs = int(base["train"]["epoch"])
    return StudySettings(study_name=study_name, storage=storage,
                         algorithm=args.algorithm, max_trials=args.max_trials, direction=direction, seed=args.seed,
                         workers=args.workers, resume=args.resume, max_epochs=max(1, epochs), baseline=not args.no_baseline)


def run_automl(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from skillbank.automl.report import write_outputs
    from skillbank.automl.space import build_space, load_schema
    from skillbank.automl.study import run_study
    from skillbank.automl.trials import make_check, make_runner
    from skillbank.skillinfo import schema_path
    from skillbank.spec.io import load_spec
    from skillbank.spec.registry import spec_model

    model = spec_model(args.skill, "train")
    base = load_spec(args.spec, model).model_dump(mode="json")
    schema = load_schema(schema_path(args.skill, "train"))
    space = build_space(schema, base, params=args.param, ranges=dict(args.range), choices=dict(args.choices))
    study_name = args.study or Path(args.spec).stem
    out_dir = Path(args.out) if args.out else Path(base["results_dir"]) / "automl" / study_name
    settings = _settings(args, base, out_dir, study_name)  # bad flags fail before anything is written
    out_dir.mkdir(parents=True, exist_ok=True)
    if settings.algorithm in ("hyperband", "asha") and "train.epoch" in space.keys():
        settings.max_epochs = int(max(p.high for p in space.params if p.key == "train.epoch"))
    log = sys.stderr
    print(f"automl: study {study_name} ({settings.algorithm}, {settings.max_trials} trials, metric {args.metric} "
          f"{settings.direction}) in {out_dir}", file=log)
    for param in space.params:
        print(f"  search {param.describe()}", file=log)
    for key, why in space.skipped.items():
        print(f"  skip   {key}: {why}", file=log)
    bar = tqdm(total=settings.max_trials, desc="trials", unit="trial", file=log, disable=None)

    def progress(trial: Any) -> None:
        bar.update(1)
        bar.set_postfix_str(f"#{trial.number} {trial.state.name} {trial.value if trial.value is not None else ''}")

    runner = make_runner(metric=args.metric, backend=args.backend, maximize=settings.direction == "maximize")
    study = run_study(settings, space, base, out_dir / "trials", runner, check=make_check(args.skill), progress=progress)
    bar.close()
    rec = write_outputs(study, skill=args.skill, algorithm=settings.algorithm, metric=args.metric,
                        storage=settings.storage, out_dir=out_dir)
    if not rec:
        raise RunError(f"no trial completed: see {out_dir / 'trials.parquet'} for each trial's reason")
    if args.json:
        print(json.dumps(rec, indent=2))
    else:
        base_value = (rec.get("baseline") or {}).get("metric_value")
        print(f"best {args.metric} {rec['metric']['value']:.4f} (trial {rec['trial_number']}), "
              f"baseline {base_value if base_value is not None else 'n/a'}; trial-epochs {rec['trials']['trial_epochs']}")
        print(f"best params: {json.dumps(rec['best_params'])}")
        print(f"wrote {out_dir / 'best_rec.json'}, {out_dir / 'trials.parquet'}, {out_dir / 'history.png'}")
    return 0


def run_from_train(args: argparse.Namespace) -> int:
    """The router sent a train request here (automl_policy auto): run a default study on its spec."""
    parser = argparse.ArgumentParser()
    from skillbank.automl.command import add_arguments

    add_arguments(parser)
    argv = ["--spec", str(args.spec), "--backend", args.backend, "--max-trials", str(args.max_trials)]
    if args.resume:
        argv.append("--resume")
    return run_automl(parser.parse_args(argv))
