"""`skillbank automl`: Optuna search over a model skill's train schema, with real training trials."""

from __future__ import annotations

import argparse

DESCRIPTION = """\
Search the hyperparameters a model skill's packaged train schema marks as searchable
(automl_default_parameters, or --param KEY ...), with real trials: each recommendation is applied
to the base spec, validated and preflighted (a failing one is recorded as pruned with the reason),
trained, and every epoch's checkpoint evaluated on the validation set. The base spec runs first as
the baseline. Results: best_rec.json, trials.parquet and history.png in the study folder.

algorithms: bayesian (TPE), random, hyperband (TPE + Hyperband pruning by epoch),
            asha (TPE + asynchronous successive halving)
storage:    a SQLite file in the study folder by default; any SQLAlchemy URL (e.g.
            postgresql://user@host/db) lets several machines work on one study. --workers K runs
            K trials at once here. A killed study continues with --resume.
"""

EXAMPLES = """\
examples:
  skillbank automl --skill tao-finetune-cosmos-reason --spec train.yaml --max-trials 12
  skillbank automl --skill tao-finetune-cosmos-reason --spec train.yaml --algorithm hyperband \\
      --param train.optm_lr --range train.optm_lr=1e-5:1e-3 --choices train.optm_decay_type=cosine,none
  skillbank automl --skill tao-finetune-cosmos-reason --spec train.yaml --study s1 --resume
"""


def _range(text: str) -> tuple[str, tuple[float, float]]:
    key, _, span = text.partition("=")
    low, sep, high = span.partition(":")
    try:
        return key, (float(low), float(high))
    except ValueError:
        raise argparse.ArgumentTypeError(f"--range wants KEY=MIN:MAX, got {text!r}") from None


def _choices(text: str) -> tuple[str, list[str]]:
    key, sep, values = text.partition("=")
    if not sep or not values:
        raise argparse.ArgumentTypeError(f"--choices wants KEY=A,B,..., got {text!r}")
    return key, [v.strip() for v in values.split(",") if v.strip()]


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--skill", default="tao-finetune-cosmos-reason", help="model skill (default: %(default)s)")
    p.add_argument("--spec", required=True, metavar="FILE", help="base train spec (from `skillbank spec`)")
    p.add_argument("--algorithm", choices=("bayesian", "random", "hyperband", "asha"), default="bayesian")
    p.add_argument("--max-trials", type=int, default=8, metavar="N", help="finished trials in the study, baseline included (default: %(default)s)")
    p.add_argument("--metric", default="accuracy", help="accuracy (default), f1 or balanced_accuracy (of each epoch's export on the validation set), or val_loss")
    p.add_argument("--direction", choices=("maximize", "minimize"), help="default: maximize accuracy, minimize val_loss")
    p.add_argument("--storage", metavar="URL", help="SQLAlchemy URL (default: sqlite:///<study folder>/study.db)")
    p.add_argument("--study", metavar="NAME", help="study name (default: the spec file's stem)")
    p.add_argument("--out", metavar="DIR", help="study folder (default: <results_dir>/automl/<study>)")
    p.add_argument("--workers", type=int, default=1, metavar="K", help="trials at once on this machine")
    p.add_argument("--resume", action="store_true", help="continue an existing study; finished trials are not run again")
    p.add_argument("--param", action="append", metavar="KEY", help="search these dotted keys instead of the schema's defaults")
    p.add_argument("--range", action="append", type=_range, default=[], metavar="KEY=MIN:MAX", help="override a search range")
    p.add_argument("--choices", action="append", type=_choices, default=[], metavar="KEY=A,B", help="override enum choices")
    p.add_argument("--seed", type=int, default=0, help="sampler seed")
    p.add_argument("--no-baseline", action="store_true", help="skip the baseline trial of the base spec")
    p.add_argument("--backend", choices=("local", "cosmos-rl"), default="local", help="training backend of each trial")
    p.add_argument("--json", action="store_true", help="print best_rec.json's content as one JSON document")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("automl", help="hyperparameter search with Optuna over the train schema (real trials)",
                       description=DESCRIPTION, epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from skillbank.automl.run import run_automl

    return run_automl(args)
