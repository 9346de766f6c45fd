"""`skillbank automl`: Optuna search over a model skill's train schema, with real training trials."""

from __future__ import annotations

import argparse

from skillbank.commands.flags import add_automl_arguments, command_parser

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
              --max-trials counts COMPLETE and PRUNED trials, exactly, across all workers.
              A searched key the base spec leaves null (fps on an nframes spec) stays null
              in the baseline; the other trials sample it (fps clears nframes).
algorithms:   bayesian (TPE), random, hyperband (TPE + Hyperband pruning by epoch),
              asha (TPE + asynchronous successive halving)
storage:      a SQLite file in the study folder by default; any SQLAlchemy URL (e.g.
              postgresql://user@host:5432/db, driver psycopg[binary] installed by the setup) lets
              workers on many machines share one study: run the same command on each, or `skillbank
              submit --action automl --storage URL` once per worker (joining needs no --resume). A
              worker with another search, or another base spec, exits 2 naming what differs (base
              spec: --allow-spec-change joins anyway). Under the study's lock (a PostgreSQL advisory
              lock; a file lock for SQLite) a trial is claimed only while finished + running trials
              stay under --max-trials, and --resume re-enqueues each failed trial once. Each trial is
              seeded by its number, so no two workers run the same parameters; the baseline runs
              once. --workers K runs K trials at once in this process. A URL whose driver is missing
              is refused (exit 2, naming the pip package) before anything starts; --dry-run checks
              that the storage answers (connect + version) and warns for a unix-socket URL.
workers:      SIGTERM / SIGINT stop this worker's trials only (FAIL, enqueued again for the other
              workers): one line names them, exit 143 (SIGTERM) / 130 (Ctrl-C), no traceback.
              --stop-study stops every worker of the study (each ends 0 with one line; --resume
              continues it). A worker killed without a word (SIGKILL, a lost node) stops beating: its
              trial is failed after 10 s and run again once by another worker. Every trainer dies
              with the worker that started it, however it died; a start or --resume first stops what
              a dead worker left here.
watch:        --status lists every trial (state, value, best so far, parameters in the user's
              units, retry_of, worker host:pid, why it ended); no spec needed: --study NAME with
              --storage URL or --out DIR. --delete-study --yes removes a study (not while it runs).
live view:    --dashboard serves optuna-dashboard on the study's storage at 127.0.0.1:--port.
--dry-run:    print the plan (search space with ranges, trials, algorithm, metric, storage,
              backend, study folder, the start and resume commands) after the preflight gate, with
              study_time_h (ceil(trials / --workers) x a trial's training + each epoch's evaluation),
              disk_gib_per_worker (what this worker holds at once; its gate checks it) and
              disk_gib_at_most, at the search's largest checkpoint: the figures `skillbank plan
              --trials N` prints; nothing is created or started.
--keep:       best (a new study's default): a finished trial that is not the best so far drops its
              checkpoints and exports (metrics, spec, evaluations and logs stay), the best keeps its
              best epoch's; all: every trial keeps every epoch's. Recorded in the study (a resumed
              or joined study keeps its rule; a study from before the rule keeps all).
SIGTERM / SIGINT stop every process tree of this worker's trials (trainer, torchrun ranks, cosmos-rl workers).
Exit codes: 0 done (or stopped with --stop-study), 2 bad input (nothing started), 1 a run failed
(no trial completed), 128 + N on signal N.

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
  skillbank automl --spec train.yaml --study s1 --storage postgresql://me@db:5432/optuna   # on each machine
  skillbank automl --study s1 --storage postgresql://me@db:5432/optuna --status [--json]   # from any machine
  skillbank automl --spec train.yaml --study s1 --storage postgresql://me@db:5432/optuna --stop-study
  skillbank automl --spec train.yaml --study s1 --storage postgresql://me@db:5432/optuna --dashboard --port 8080
  skillbank automl --action evaluate --spec evaluate.yaml --prompts prompts.txt --holdout test/annotations.json --dry-run
  skillbank automl --action evaluate --spec evaluate.yaml --prompts prompts.yaml --choices vision.fps=1,2,4 \\
      --holdout test/annotations.json:test/videos
"""


def register(sub: argparse._SubParsersAction) -> None:
    p = command_parser(sub, "automl", DESCRIPTION, epilog=EXAMPLES)
    add_automl_arguments(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from skillbank.errors import InputError

    live = [flag for flag, on in (("--status", args.status), ("--stop-study", args.stop_study),
                                  ("--delete-study", args.delete_study), ("--dashboard", args.dashboard)) if on]
    if len(live) > 1:
        raise InputError(f"{' and '.join(live)} are separate commands", where=live[1], fix="give one of them")
    if live:
        from skillbank.commands import automl_control as control

        return {"--status": control.show_status, "--stop-study": control.stop_study, "--delete-study": control.delete_study,
                "--dashboard": control.serve_dashboard}[live[0]](args)
    if args.yes:
        raise InputError("--yes confirms --delete-study", where="--yes", fix="drop it, or add --delete-study")
    if not args.spec:
        raise InputError("a study needs its base spec", where="--spec", fix="pass --spec FILE (from `skillbank spec`)")
    if args.action == "evaluate":
        from skillbank.commands.automl_prompts import run_prompt_search

        return run_prompt_search(args)
    from skillbank.commands.automl_run import run_automl

    return run_automl(args)
