"""`skillbank automl`: Optuna search over a model skill's train schema, with real training trials."""

from __future__ import annotations

import argparse

from skillbank.automl import ALGORITHMS, DEFAULT_ALGORITHM, DEFAULT_TRIALS
from skillbank.training.backends import BACKEND_HELP, BACKENDS, DEFAULT_BACKEND

DESCRIPTION = """\
Search the hyperparameters a model skill's packaged train schema marks as searchable
(automl_default_parameters, or --param KEY ...), with real trials. Before anything is created the
base spec must pass preflight for the trials' backend (else exit 2, naming the findings, no study).
Each recommendation is applied to the base spec, validated and preflighted, trained, and every
epoch's checkpoint evaluated on the validation set. The base spec runs first as the baseline.
Results: best_rec.json, trials.parquet and history.png in the study folder.

trial states: COMPLETE (a metric); PRUNED (the recommendation breaks a spec rule or its preflight,
              or the pruner stopped it: never run again); FAIL (an environment reason: env.*
              preflight findings, training crashed, the study was stopped: run again on --resume).
              --max-trials counts COMPLETE and PRUNED trials.
algorithms:   bayesian (TPE), random, hyperband (TPE + Hyperband pruning by epoch),
              asha (TPE + asynchronous successive halving)
storage:      a SQLite file in the study folder by default; any SQLAlchemy URL (e.g.
              postgresql://user@host/db) lets several machines work on one study. --workers K runs
              K trials at once here. A stopped or killed study continues with --resume.
--dry-run:    print the plan (search space with ranges, trials, algorithm, metric, storage,
              backend, study folder, the start and resume commands) after the preflight gate;
              nothing is created or started.
SIGTERM / SIGINT stop every trial's process tree (trainer, torchrun ranks, cosmos-rl workers).

--action evaluate (prompt search): --spec is an evaluate spec; a trial evaluates it with the sampled
              values on its dataset (the proxy set), no training; the model loads once. Search
              system prompts (--prompts FILE: one per line, or a YAML list with null for the
              answer type's default) and any evaluate key (--choices evaluation.answer_type=short,reasoning,
              --choices vision.fps=1,2,4, --param generation.max_tokens --range ...). Lists of choices
              join the base spec's value (the baseline). bayesian (the default) over choices only runs
              the grid: each combination once, in order, up to --max-trials. The best trial and the
              baseline are evaluated once on --holdout ANNOTATIONS[:MEDIA]; both numbers go into
              best_rec.json (holdout, cost). A candidate the spec rejects is PRUNED with the reason.
"""

EXAMPLES = """\
examples:
  skillbank automl --skill tao-finetune-cosmos-reason --spec train.yaml --dry-run
  skillbank automl --skill tao-finetune-cosmos-reason --spec train.yaml --max-trials 12 --backend cosmos-rl
  skillbank automl --skill tao-finetune-cosmos-reason --spec train.yaml --algorithm hyperband \\
      --param train.optm_lr --range train.optm_lr=1e-5:1e-3 --choices train.optm_decay_type=cosine,none
  skillbank automl --skill tao-finetune-cosmos-reason --spec train.yaml --study s1 --resume
  skillbank automl --action evaluate --spec evaluate.yaml --prompts prompts.txt --holdout test/annotations.json --dry-run
  skillbank automl --action evaluate --spec evaluate.yaml --prompts prompts.yaml --choices vision.fps=1,2,4 \\
      --holdout test/annotations.json:test/videos
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


def add_search_arguments(p: argparse.ArgumentParser, *, trials_flags: tuple[str, ...] = ("--max-trials",)) -> None:
    """What a study searches and how: shared by `skillbank automl` and train's AutoML handoff."""
    p.add_argument("--algorithm", choices=ALGORITHMS, default=DEFAULT_ALGORITHM, help="search algorithm (default: %(default)s)")
    p.add_argument(*trials_flags, dest="max_trials", type=int, default=DEFAULT_TRIALS, metavar="N",
                   help="finished (complete or pruned) trials of the study, baseline included (default: %(default)s)")
    p.add_argument("--param", action="append", metavar="KEY", help="search these dotted keys instead of the schema's automl_default_parameters")
    p.add_argument("--range", action="append", type=_range, default=[], metavar="KEY=MIN:MAX", help="override a search range")
    p.add_argument("--choices", action="append", type=_choices, default=[], metavar="KEY=A,B", help="override enum choices")
    p.add_argument("--study", metavar="NAME", help="study name (default: the spec file's stem)")


DEFAULT_METRIC = "accuracy"


def add_metric_argument(p: argparse.ArgumentParser) -> None:
    """--metric: shared by `skillbank automl` and `skillbank submit --action automl`."""
    p.add_argument("--metric", default=DEFAULT_METRIC, help="accuracy (default), f1 or balanced_accuracy (of each epoch's export on the validation set), or val_loss")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--skill", default="tao-finetune-cosmos-reason", help="model skill (default: %(default)s)")
    p.add_argument("--action", choices=("train", "evaluate"), default="train",
                   help="train: each trial trains (default); evaluate: prompt search, each trial evaluates --spec (an evaluate spec)")
    p.add_argument("--spec", required=True, metavar="FILE", help="base train spec (an evaluate spec with --action evaluate; from `skillbank spec`)")
    p.add_argument("--prompts", metavar="FILE", help="--action evaluate: system prompt candidates, one per line or a YAML list (null: the default); "
                   "records opening with their own system turn keep it (counted in the plan and best_rec.json; a proxy set "
                   "where every record does is refused)")
    p.add_argument("--holdout", metavar="ANNOTATIONS[:MEDIA]", help="--action evaluate: held-out set the best trial and the baseline are evaluated on once")
    add_search_arguments(p)
    add_metric_argument(p)
    p.add_argument("--direction", choices=("maximize", "minimize"), help="default: maximize accuracy, minimize val_loss")
    p.add_argument("--storage", metavar="URL", help="SQLAlchemy URL (default: sqlite:///<study folder>/study.db)")
    p.add_argument("--out", metavar="DIR", help="study folder (default: <results_dir>/automl/<study>)")
    p.add_argument("--workers", type=int, default=1, metavar="K", help="trials at once on this machine (default: %(default)s)")
    p.add_argument("--resume", action="store_true", help="continue an existing study: finished trials are kept, failed ones (and an unfinished baseline) run again")
    p.add_argument("--seed", type=int, default=0, help="sampler seed (default: %(default)s)")
    p.add_argument("--no-baseline", action="store_true", help="skip the baseline trial of the base spec")
    p.add_argument("--backend", choices=BACKENDS, default=DEFAULT_BACKEND, help=f"each trial's {BACKEND_HELP}")
    p.add_argument("--dry-run", action="store_true", help="print the study plan and the start / resume commands; create and start nothing")
    p.add_argument("--json", action="store_true", help="print best_rec.json's content (the plan with --dry-run) as one JSON document")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("automl", help="hyperparameter search with Optuna over the train schema (real trials)",
                       description=DESCRIPTION, epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if args.action == "evaluate":
        from skillbank.automl.prompts import run_prompt_search

        return run_prompt_search(args)
    from skillbank.automl.run import run_automl

    return run_automl(args)
