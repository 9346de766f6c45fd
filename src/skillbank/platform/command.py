"""`skillbank submit` and `skillbank jobs status|logs|cancel|list|schema` (argparse only at import)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from skillbank.automl import DEFAULT_ALGORITHM, DEFAULT_TRIALS
from skillbank.automl.command import DEFAULT_METRIC, add_metric_argument, add_search_arguments, add_storage_argument
from skillbank.training.backends import BACKENDS

PLATFORMS = ("local", "docker", "slurm")
DIAGNOSE_HELP = """\
Read a training run's folder and logs (nothing is written) and say:
  state                     running | failed | finished (unknown: nothing logged yet)
  cause                     the failure the logs show (cosmos-rl's known fatal messages explained; else the
                            last exception), or why a silent stop looks like a kill
  last_step, total_steps    from the master rank's "Step: s/T" lines
  last_complete_checkpoint  the newest step_N/policy with cosmos_config and one .rank_R_complete marker per
                            saving rank (cosmos-rl's own rule: saves are asynchronous, a "saved" log line
                            proves nothing); incomplete_checkpoints lists the others and what they miss
  last_traceback            the tail of the last traceback in the logs
  resume_command            how to go on from that checkpoint: `skillbank train --resume-from`, after
                            `skillbank spec --from <the run's config> --from-format cosmos-rl` for a run skillbank
                            did not launch (cosmos-rl's own defaults kept for keys the config does not set)
A run is "running" while its logs moved in the last --stale-after seconds. Works on runs skillbank did
not launch (cosmos-rl 0.4.x output and --log-dir layouts) and on both skillbank backends.
examples:
  skillbank jobs diagnose /lustre/me/outputs/sft/20250601120000 --json
  skillbank jobs diagnose /lustre/me/logs            # a cosmos-rl --log-dir folder
"""
ACTIONS = ("train", "automl", "rl")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "submit",
        help="run a train spec (or an AutoML study on it, or an rl spec's GRPO) on this machine, in Docker, or on Slurm (preflight first; a job record either way)",
        description="Submit a train spec as a job: `skillbank train` (--action train, the default) or an AutoML study "
        "(--action automl: `skillbank automl --resume --study NAME --out <results_dir>/automl/NAME`; the study name defaults to "
        "the spec file's stem, so re-submitting the same spec, or a Slurm requeue, continues the same study; `jobs cancel` "
        "stops every trial), or an rl spec's GRPO (--action rl: cosmos-rl on the TOMLs rendered into the job folder, a requeue resumes from "
        "the newest checkpoint; --backend local: `skillbank rl --backend local`). Preflight runs first: a spec or data error submits nothing (exit 2). "
        "The environment (HF_TOKEN, redis-server, GPUs, free disk) is checked here for --platform local; for docker and "
        "slurm its findings are listed as 'check on the node' and the rendered job runs `skillbank preflight --only env` "
        "as its first step there. --dry-run writes the command or sbatch script into <results_dir>/jobs/<id>/ and submits nothing.",
    )
    p.add_argument("--platform", required=True, choices=PLATFORMS)
    p.add_argument("--spec", required=True, metavar="FILE", help="train spec (YAML) of the model skill (automl: the study's base spec; rl: an rl spec)")
    p.add_argument("--action", choices=ACTIONS, default="train", help="train (default): one training run; automl: a hyperparameter study on the spec, its trials one after another where the job runs; "
                   "rl: GRPO from an rl spec (policy + rollout GPUs on one node)")
    p.add_argument("--model-family", default=None, choices=("qwen2_5_vl", "qwen3_vl", "qwen3_vl_moe"),
                   help="rl: the family of a start checkpoint this machine cannot read (default: its config.json here, with --path-map at LOCAL, else its name)")
    p.add_argument("--backend", choices=BACKENDS, default=None, help="training backend (default: cosmos-rl on every platform; local: torchrun + FSDP2, one node)")
    p.add_argument("--skill", default="tao-finetune-cosmos-reason", help="model skill the spec belongs to")
    p.add_argument("--nodes", type=int, default=None, metavar="N", help="confirm the node count (must equal policy.parallelism.dp_replicate_size)")
    p.add_argument("--gpus-per-node", type=int, default=None, metavar="G", help="GPUs per node (slurm: must equal dp_shard*tp*cp*pp, "
                   "or 0 with --backend local for a CPU job: dp_shard*tp*cp*pp CPU ranks, --cpus-per-task of as many, no GRES, no --exclusive; "
                   "local/docker: what the machine has, for preflight)")
    p.add_argument("--image", default=None, help="docker: container image (default: the skill's container_image, built from the checkout's Dockerfile); "
                   "slurm: run every step in this image through pyxis/enroot (a registry reference or an .sqsh file; default: no container, the submitting Python environment)")
    p.add_argument("--shm-size", default="16g", help="docker: --shm-size of the container (default 16g)")
    p.add_argument("--partition", default=None, help="slurm: partition")
    p.add_argument("--account", default=None, help="slurm: account")
    p.add_argument("--time", default=None, metavar="HH:MM:SS", help="slurm: time limit")
    p.add_argument("--resume-from", metavar="CHECKPOINT", default=None,
                   help="train: the job starts from this checkpoint (`skillbank train --resume-from`: a step_N[/policy] or run folder, "
                   "complete by cosmos-rl's markers; checked here when this machine has it, else on the node); a requeued attempt "
                   "continues its own newest checkpoint instead")
    p.add_argument("--dry-run", action="store_true", help="render into the job folder, print its path, submit nothing; writes only <results_dir>/jobs/<id>/ and its record "
                   "<results_dir>/jobs/<id>.json (not indexed: `jobs status` finds it by path or --results-dir); the environment is checked on the node, every platform alike")
    from skillbank.specification.pathmap import add_argument as add_path_map

    add_path_map(p)
    p.add_argument("--json", action="store_true", help="print the job record as one JSON document")
    search = p.add_argument_group("--action automl", "what the study searches (as `skillbank automl`; the job always passes --resume)")
    add_search_arguments(search)
    add_metric_argument(search)
    add_storage_argument(search)
    p.set_defaults(run=run_submit)

    jobs = sub.add_parser("jobs", help="status, logs, cancel or diagnose of a job (by id, record path, or any run folder for diagnose)")
    verbs = jobs.add_subparsers(dest="verb", metavar="VERB", required=True)
    for name, fn, text in (
        ("status", run_status, "refresh and print the job record (slurm: squeue, then scontrol show job, then sacct once it left the "
                               "queue; a final state - succeeded, failed, cancelled - with exit code and times is kept in the record)"),
        ("logs", run_logs, "print the last lines of the job's log (slurm: slurm-<id>.out, every requeued attempt appended)"),
        ("cancel", run_cancel, "stop the job and wait until nothing of it runs (SIGTERM to the process tree / docker stop / scancel, "
                               "then Slurm's end of the job; its processes left on this machine are stopped too)"),
    ):
        v = verbs.add_parser(name, help=text, description=text)
        v.add_argument("job", metavar="JOB", help="job id (printed by submit) or path of <results_dir>/jobs/<id>.json")
        v.add_argument("--results-dir", default=None, help="where to look for jobs/<id>.json besides the job index")
        if name == "logs":
            v.add_argument("--tail", type=int, default=100, metavar="N", help="lines to show (default 100)")
        else:
            v.add_argument("--json", action="store_true", help="print the record as one JSON document")
        v.set_defaults(run=fn)
    v = verbs.add_parser(
        "diagnose",
        help="what happened to a training run, launched by skillbank or not: state, cause, last complete checkpoint, resume command",
        description=DIAGNOSE_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    v.add_argument("dir", metavar="DIR", help="a cosmos-rl run folder (<output_dir>/<timestamp>), an output_dir, a --log-dir folder "
                   "(logs_latest/), one logs_<time> folder, or a skillbank run folder")
    v.add_argument("--stale-after", type=float, default=None, metavar="S",
                   help="logs unchanged for S seconds mean the run is not running (default 600)")
    v.add_argument("--json", action="store_true", help="print one JSON document (keys below)")
    v.set_defaults(run=run_diagnose)
    v = verbs.add_parser("list", help="known jobs, newest first, with their last recorded status", description="Jobs in the index (and under --results-dir), with the status last written to each record (`jobs status` refreshes one).")
    v.add_argument("--results-dir", default=None)
    v.add_argument("--json", action="store_true")
    v.set_defaults(run=run_list)
    v = verbs.add_parser("schema", help="print the JSON Schema of a job record")
    v.add_argument("-o", "--output", default=None, metavar="FILE", help="write it to FILE instead")
    v.set_defaults(run=run_schema)


def _print_record(record: Any, path: Any, as_json: bool, headline: str, study: dict | None = None) -> None:
    """The record (an AutoML job's: with its study's trials, `skillbank automl --status`'s summary)."""
    if as_json:
        print(json.dumps({"ok": True, "record_path": str(path), "record": record.model_dump(mode="json"),
                          **({"study": study} if study is not None else {})}, indent=2, default=str))
        return
    print(headline)
    print(f"  record:  {path}")
    if record.script:
        print(f"  script:  {record.script}")
    if record.outputs.log:
        print(f"  log:     {record.outputs.log}")
    if record.outputs.run_dir:
        print(f"  run:     {record.outputs.run_dir}")
    if record.outputs.study_dir:
        print(f"  study:   {record.outputs.study_dir}  (best_rec.json, trials.parquet when it ends; re-submit the spec to resume)")
    for note in record.notes:
        print(f"  note:    {note}")
    for line in record.preflight.get("check_on_node", []):
        print(f"  check on the node: {line}")
    if study is not None:
        from skillbank.automl.status import lines

        print(*(["  " + line for line in lines(study)] if study.get("ok") else [f"  study:   {study['error']}"]), sep="\n")


def study_of(record: Any) -> dict | None:
    """An AutoML job's study as `skillbank automl --status --json` shows it (None for other jobs; ok false
    with the reason when it cannot be read from here: not created yet, another machine's file)."""
    if record.action != "automl" or not record.outputs.study_dir:
        return None
    from pathlib import Path

    from skillbank.automl.status import open_existing, summary
    from skillbank.errors import InputError

    storage = record.outputs.study_storage or f"sqlite:///{Path(record.outputs.study_dir) / 'study.db'}"
    try:
        return summary(open_existing(storage, Path(record.outputs.study_dir).name))
    except InputError as exc:
        return {"ok": False, "error": f"not readable from here: {exc.message}"}
    except Exception as exc:  # noqa: BLE001 - a storage that does not answer from here: the record still prints
        return {"ok": False, "error": f"not readable from here: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"}


def run_submit(args: argparse.Namespace) -> int:
    from skillbank.platform.context import Options
    from skillbank.platform.submit import submit
    from skillbank.specification.pathmap import from_args

    options = Options(image=args.image, partition=args.partition, account=args.account, time=args.time, shm_size=args.shm_size)
    record, path = submit(
        platform=args.platform, spec_path=args.spec, backend=args.backend, skill=args.skill,
        nodes=args.nodes, gpus_per_node=args.gpus_per_node, options=options, dry_run=args.dry_run, automl=automl_job(args),
        paths=from_args(args), action=args.action if args.action != "automl" else "train", model_family=args.model_family,
        resume_from=args.resume_from,
    )
    if args.dry_run:
        headline = f"job {record.id}: rendered for {record.platform} ({record.backend}); nothing was submitted\n{record.script}"
    else:
        headline = f"job {record.id}: {record.action} submitted to {record.platform} ({record.backend}), {record.external_kind} {record.external_id}"
        headline += f"\n  next:    skillbank jobs status {record.id}   |   skillbank jobs logs {record.id}"
    _print_record(record, path, args.json, headline)
    return 0


def automl_job(args: argparse.Namespace) -> Any:
    """The study of --action automl (None for train); search flags with --action train are an input error."""
    from pathlib import Path

    from skillbank.errors import InputError
    from skillbank.platform.context import AutomlJob

    given = [flag for flag, value, default in (
        ("--algorithm", args.algorithm, DEFAULT_ALGORITHM), ("--max-trials", args.max_trials, DEFAULT_TRIALS),
        ("--metric", args.metric, DEFAULT_METRIC), ("--param", args.param, None), ("--range", args.range, []),
        ("--choices", args.choices, []), ("--study", args.study, None), ("--storage", args.storage, None)) if value != default]
    if args.action != "automl":
        if given:
            raise InputError(f"{', '.join(given)} belong(s) to an AutoML study", where=given[0], fix="add --action automl, or drop the flag")
        return None
    if args.max_trials < 1:
        raise InputError("--max-trials must be at least 1", where="--max-trials")
    study = args.study or Path(args.spec).stem
    if not study or "/" in study or study in (".", ".."):
        raise InputError(f"--study {study!r} is not a folder name", where="--study", fix="use a plain name such as lr-sweep")
    if args.storage:
        from skillbank.automl.storage import check_url, password_free

        check_url(args.storage)
        password_free(args.storage)  # the URL is written into the job's script and record
    return AutomlJob(
        study=study, algorithm=args.algorithm, max_trials=args.max_trials, metric=args.metric,
        params=tuple(args.param or ()), ranges=tuple(args.range), choices=tuple((k, tuple(v)) for k, v in args.choices),
        storage=args.storage,
    )


def run_status(args: argparse.Namespace) -> int:
    from skillbank.platform.submit import status

    record, path = status(args.job, args.results_dir)
    when = f", ended {record.ended}" if record.ended else (f", started {record.started}" if record.started else "")
    code = f", exit {record.exit_code}" if record.exit_code is not None else ""
    _print_record(record, path, args.json, f"job {record.id}: {record.status} on {record.platform} ({record.backend}){when}{code}",
                  study=study_of(record))
    return 0


def run_logs(args: argparse.Namespace) -> int:
    from skillbank.platform.submit import logs

    _, text = logs(args.job, tail=args.tail, results_dir=args.results_dir)
    print(text, end="" if text.endswith("\n") or not text else "\n")
    return 0


def run_cancel(args: argparse.Namespace) -> int:
    from skillbank.platform.submit import cancel

    record, path = cancel(args.job, args.results_dir)
    headline = f"job {record.id}: {record.status}"
    if record.action == "automl":  # the stopped worker's one line: which trials stopped and were re-queued
        from skillbank.platform.submit import logs

        try:
            said = [ln for ln in logs(args.job, tail=50, results_dir=args.results_dir)[1].splitlines()
                    if ln.startswith(("automl: this worker stopped", "automl: the study was stopped"))]
        except Exception:  # noqa: BLE001 - no log readable here: the record still prints
            said = []
        headline += f"\n  stop:    {said[-1]}" if said else ""
    _print_record(record, path, args.json, headline, study=study_of(record))
    return 0


def run_list(args: argparse.Namespace) -> int:
    from skillbank.platform import record as rec

    rows = []
    for path in rec.list_records(args.results_dir):
        try:
            r = rec.load(path)
        except Exception:  # noqa: BLE001 - a broken record must not hide the others
            continue
        rows.append({"id": r.id, "platform": r.platform, "backend": r.backend, "status": r.status, "submitted": r.submitted, "record": str(path)})
    if args.json:
        print(json.dumps({"ok": True, "jobs": rows}, indent=2))
    else:
        for row in rows:
            print(f"{row['id']}  {row['status']:<10} {row['platform']:<7} {row['backend']:<10} {row['submitted']}  {row['record']}")
    return 0


def run_diagnose(args: argparse.Namespace) -> int:
    from skillbank.errors import InputError
    from skillbank.training.diagnose import STALE_AFTER_S, diagnose

    try:
        diag = diagnose(args.dir, stale_after_s=STALE_AFTER_S if args.stale_after is None else args.stale_after)
    except ValueError as exc:
        raise InputError(str(exc), where=args.dir, fix="pass the run folder (<output_dir>/<timestamp>, with checkpoints/) or the --log-dir folder cosmos-rl wrote") from None
    if args.json:
        print(json.dumps({"ok": True, **diag.to_dict()}, indent=2))
    else:
        print("\n".join(diag.lines()))
    return 0


def run_schema(args: argparse.Namespace) -> int:
    from skillbank import atomic
    from skillbank.platform.record import json_schema

    text = json.dumps(json_schema(), indent=2) + "\n"
    if args.output:
        atomic.write_text(args.output, text)
    else:
        print(text, end="")
    return 0
