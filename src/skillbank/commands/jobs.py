"""`skillbank submit` and `skillbank jobs status|logs|wait|cancel|attach|list|schema|diagnose` (argparse only at import)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from skillbank.automl import DEFAULT_ALGORITHM, DEFAULT_TRIALS
from skillbank.commands.flags import (add_backend, add_dry_run, add_gpus_per_node, add_json, add_metric_argument,
                                      add_model_family, add_nodes, add_resume_from, add_search_arguments, add_skill,
                                      add_spec, add_storage_argument, command_parser, DEFAULT_METRIC, DEFAULT_SKILL)

PLATFORMS = ("local", "docker", "slurm")
DIAGNOSE_HELP = """\
Read a training run's folder and logs (nothing is written) and say:
  state                     running | failed | finished (unknown: nothing logged yet)
  cause, fix                the known failure the logs show, with its fix: vision tokens cut at
                            policy.model_max_length, CUDA OOM (with `skillbank plan`'s memory per GPU for the
                            run's spec: oom_plan), NCCL timeout, a record without video_fps, redis-server
                            missing, the hub's 401/403, a full disk, zero steps, no GPU (known_causes lists
                            each seen, with its log line); else the last exception, or why a silent stop
                            looks like a kill
  last_step, total_steps    from the master rank's "Step: s/T" lines
  last_loss                 the last step's loss (raw); last_loss_smoothed: the median of the last 20 logged
                            steps (loss_smoothing says which); last_val_loss, last_val_step: the last validation
  last_complete_checkpoint  the newest step_N/policy with cosmos_config and one .rank_R_complete marker per
                            saving rank (cosmos-rl's own rule: saves are asynchronous, a "saved" log line
                            proves nothing); incomplete_checkpoints lists the others and what they miss
  last_traceback            the tail of the last traceback in the logs
  bad_nodes                 the nodes the logs blame: {node, why, evidence}; why: xid, ecc (an uncorrectable
                            ECC / NVLink error), nccl_timeout (the ranks that stayed silent while their peers
                            reported a collective timeout; rank // GPUs per node -> the host in the batch log's
                            node list); `skillbank submit --platform slurm --retry-of JOB` excludes them
  resume_command            how to go on from that checkpoint: `skillbank train --resume-from`, after
                            `skillbank spec --from <the run's config> --from-format cosmos-rl` for a run skillbank
                            did not launch (cosmos-rl's own defaults kept for keys the config does not set)
A run is "running" while its logs moved in the last --stale-after seconds. Works on runs skillbank did
not launch (cosmos-rl 0.4.x output and --log-dir layouts) and on both skillbank backends.
DIR|JOB may be a job id, a job folder or its record: the job record is read first and its platform asked
(job_id, record_status; scheduler: Slurm's own state from squeue / scontrol / sacct where they answer);
a cancelled job is "cancelled" whatever its logs say (--stale-after never blames a time limit or the OOM
killer for it), and a job the platform ended as failed is "failed". A submitted job's run folder
(<output_dir>/<job id>/<stamp>, what submit fixes) or its run root finds its record too. A Slurm run's logs: <run>/cosmos-rl-logs/
node_<i>/logs_latest/ (every node's read together), its batch output in the job folder (slurm-<id>.out).
exit codes (for CI):
  0  finished, or running fine
  1  the run failed (cause and fix above)
  2  bad input: no such job, folder or logs
  3  the job was cancelled
  4  nothing to judge yet (queued, nothing logged) or its end is unknown
examples:
  skillbank jobs diagnose train-20260101-120000-ab12cd --json    # a job: its record, Slurm's state, its run's logs
  skillbank jobs diagnose /lustre/me/outputs/sft/20250601120000 --json
  skillbank jobs diagnose /lustre/me/logs            # a cosmos-rl --log-dir folder
  skillbank jobs diagnose results/train/<job id>/cosmos-rl-logs   # a Slurm run's logs, every node's
"""
STATUS_HELP = """\
Refresh and print the job's status document: its record as the platform answers (local: the runner's
state.json; docker: docker inspect; slurm: squeue, then scontrol show job, then sacct once it left the
queue; a final state with exit code and times is kept in the record; a foreground `skillbank train`: its
pid), what the job wrote where it ran (the job folder's node.json: attempts, values re-fitted on the
node), and the run's progress read from its run folder (outputs.run_dir):
  progress: state, run_dir, last_step, total_steps, last_loss, last_val_loss, last_val_step,
            val_at_final_step (once ended), last_complete_checkpoint, export, attempts, cause, updated
--json prints {ok, record_path, progress, record}; --watch prints it again each time the status or the
progress changes until the job ends (--json: one JSON line each, with "time"): a dashboard tails it.
examples:
  skillbank jobs status train-20260101-120000-ab12cd --json
  skillbank jobs status train-20260101-120000-ab12cd --watch --json --interval 30
"""
ACTIONS = ("train", "automl", "rl", "deft")
WAIT_HELP = """\
Block until the job reaches a final state, then print its record (as `jobs status`). It looks as `jobs status`
does (local: the runner's state.json; docker: docker inspect; slurm: squeue, scontrol, then sacct), every
0.5 s at first and then less often, up to every 5 s, and writes each change of status to the record; each
change is also printed on stderr as it happens.
exit codes:
  0  the job succeeded
  1  it failed or was cancelled (`skillbank jobs logs JOB` shows why)
  2  no such job, or a job only rendered by --dry-run (nothing runs)
  3  --timeout passed first: the job goes on (wait again, or `skillbank jobs cancel JOB`)
  4  its end is unknown: the local runner vanished (SIGKILL, a restart), the container is gone, or Slurm
     forgot the job (no accounting): read `skillbank jobs logs JOB`
--json prints {ok (succeeded), outcome (succeeded|failed|cancelled|unknown|timeout), exit, waited_s,
record_path, progress (as `jobs status`: last step of total, losses, the last validation and whether it was
at the final step, checkpoint, export, attempts, cause), record}.
examples:
  skillbank jobs wait train-20260101-120000-ab12cd --timeout 3600 --json
"""
ATTACH_HELP = """\
Record a Slurm job submitted by hand, so `skillbank jobs status|logs|cancel|wait` follow it:
  skillbank submit --platform slurm --spec train.yaml --dry-run      # renders <results_dir>/jobs/<id>/
  cd <results_dir>/jobs/<id> && sbatch job.sbatch                      # (or copy the folder anywhere first)
  skillbank jobs attach --slurm-id 4242 --job-dir <results_dir>/jobs/<id>
  skillbank jobs attach <job folder>          # the id read from the folder's newest slurm-<N>.out
DIR is a job folder skillbank rendered (job.sbatch, the spec copy, job.json), wherever it now lies. The
Slurm id defaults to N of the newest slurm-<N>.out in it (Slurm writes it when the job starts). Slurm is
asked first: a job it knows under another name than skillbank-<id> is refused (exit 2), and so is a
folder whose record still follows another Slurm job that has not ended. The record (the dry run's
<id>.json beside the folder, or one built from job.json when the folder travelled alone) becomes a
submitted Slurm job: external_id N, log <folder>/slurm-N.out, a note that it was attached; it is written
beside the folder and indexed, so the job id works from any directory. Run it where Slurm answers
(scontrol on PATH).
"""

SUBMIT_DESCRIPTION = (
    "Submit a train spec as a job: `skillbank train` (--action train, the default) or an AutoML study "
    "(--action automl: `skillbank automl --resume --study NAME --out <results_dir>/automl/NAME`; the study name defaults to "
    "the spec file's stem, so re-submitting the same spec, or a Slurm requeue, continues the same study; `jobs cancel` "
    "stops every trial), or an rl spec's GRPO (--action rl: cosmos-rl on the TOMLs rendered into the job folder, a requeue resumes from "
    "the newest checkpoint; --backend local: `skillbank rl --backend local`), or a DEFT loop (--action deft --config deft.yaml: "
    "`skillbank deft --config <copy> --resume` on one node, every round trained on the job's allocation, the base train spec's shape; "
    "a requeued or re-submitted job continues at its round; the job folder is <output_dir>/jobs/<id>/). "
    "Preflight runs first: a spec or data error submits nothing (exit 2). "
    "The environment (HF_TOKEN, redis-server, GPUs, free disk) is checked here for --platform local; for docker and "
    "slurm its findings are listed as 'check on the node' and the rendered job runs `skillbank preflight --only env` "
    "as its first step there. --dry-run writes the command or sbatch script into <results_dir>/jobs/<id>/ and submits nothing. "
    "Jobs that travel: the job runs from the spec copy in its job folder and works in that folder, wherever it was moved; "
    "the copy names every path absolute as it was meant here (a relative path, or a relative default such as results_dir ./results, "
    "from this directory; under --path-map as the node names it), so a relative path you write into the copy yourself starts at the job folder. "
    "A rendered script finds its folder from its own location; local command.sh finds skillbank through SKILLBANK_VENV, then `skillbank` on PATH, "
    "then this machine's interpreter, and says which. Follow a job with `skillbank jobs status|logs|wait|cancel ID`; "
    "a job.sbatch submitted by hand joins them with `skillbank jobs attach`."
)


def register(sub: argparse._SubParsersAction) -> None:
    p = command_parser(sub, "submit", SUBMIT_DESCRIPTION, raw=False)
    p.add_argument("--platform", required=True, choices=PLATFORMS)
    add_spec(p, "train spec (YAML) of the model skill (automl: the study's base spec; rl: an rl spec); required unless --retry-of; "
                "deft takes --config instead", metavar="FILE")
    p.add_argument("--config", metavar="FILE", help="deft: the DEFT loop's config (deft.yaml from `skillbank deft init`); its train_spec gives the job's shape, "
                   "retrain.backend its backend, its recorded path map (paths.map) joins --path-map")
    p.add_argument("--action", choices=ACTIONS, default="train", help="train (default): one training run; automl: a hyperparameter study on the spec, its trials one after another where the job runs; "
                   "rl: GRPO from an rl spec (policy + rollout GPUs on one node); deft: the DEFT loop of --config, its rounds on the job's node")
    add_model_family(p, "rl: the family of a start checkpoint this machine cannot read (default: its config.json here, with --path-map at LOCAL, else its name)")
    add_backend(p, "training backend (default: cosmos-rl on every platform; local: torchrun + FSDP2, one node)", default=None)
    add_skill(p, "model skill the spec belongs to", default=DEFAULT_SKILL)
    add_nodes(p, "confirm the node count (must equal policy.parallelism.dp_replicate_size)", metavar="N")
    add_gpus_per_node(p, "GPUs per node (slurm: must equal dp_shard*tp*cp*pp; "
                   "local/docker: what the machine has, for preflight). 0 on any platform, with --backend local: a CPU job of dp_shard*tp*cp*pp "
                   "CPU ranks, CUDA_VISIBLE_DEVICES empty, no GPU check (slurm: --cpus-per-task of as many, no GRES, no --exclusive; docker: no --gpus)", metavar="G")
    p.add_argument("--image", default=None, help="docker: container image (default: the skill's container_image, built from the checkout's Dockerfile); "
                   "slurm: run every step in this image through pyxis/enroot (a registry reference or an .sqsh file; default: no container, the submitting Python environment)")
    p.add_argument("--shm-size", default="16g", help="docker: --shm-size of the container (default 16g)")
    p.add_argument("--partition", default=None, help="slurm: partition")
    p.add_argument("--account", default=None, help="slurm: account")
    p.add_argument("--time", default=None, metavar="HH:MM:SS",
                   help="slurm: time limit of each attempt (default: `skillbank plan`'s suggested time for a train or rl job: its total + 25%% + 15 min on h100-80gb "
                        "at MFU 0.3, said in the record's notes; none for a CPU job or an AutoML study), capped by --time-limit. Shortly before it the job "
                        "requeues itself (--signal=B:USR1@300, or a quarter of a limit under 20 min) and resumes from its newest complete checkpoint; an attempt "
                        "that wrote no new checkpoint ends the job failed")
    p.add_argument("--time-limit", default=None, metavar="H|HH:MM:SS",
                   help="slurm: the longest --time the partition allows (hours or a Slurm time; default: the partition's MaxTime from `scontrol show partition` "
                        "where it answers): a longer planned --time is capped to it and the run takes several attempts")
    p.add_argument("--exclude", default=None, metavar="NODE,...",
                   help="slurm: nodes the job must not run on (#SBATCH --exclude), checked against sinfo's node list so an exclusion never leaves fewer nodes "
                        "than the job needs")
    p.add_argument("--resume-run", default=None, metavar="RUN_DIR",
                   help="train: continue this run folder on purpose (another job's outputs.run_dir), from its newest complete checkpoint, instead of a new "
                        "run under <train.output_dir>/<job id>/. Without it a job whose run root already holds another run's checkpoints is refused")
    p.add_argument("--retry-of", default=None, metavar="JOB",
                   help="resubmit a job's run (its spec copy, platform options and run folder: it resumes from that run's newest complete checkpoint) with "
                        "the nodes its diagnosis blames (NCCL timeout rank -> host, Xid / ECC / CUDA errors: `skillbank jobs diagnose JOB`) added to --exclude")
    add_resume_from(p, "train: the job starts from this checkpoint (`skillbank train --resume-from`: a step_N[/policy] or run folder, "
                   "complete by cosmos-rl's markers; checked here when this machine has it, else on the node); a requeued attempt "
                   "continues its own newest checkpoint instead")
    add_dry_run(p, "render into the job folder, print its path, submit nothing; writes only <results_dir>/jobs/<id>/ and its record "
                   "<results_dir>/jobs/<id>.json (not indexed: `jobs status` finds it by path or --results-dir); the environment is checked on the node, every platform alike")
    from skillbank.commands.flags import add_path_map

    add_path_map(p)
    from skillbank.commands.flags import add_described

    add_described(p, "the real dataset, described (--action train): the spec's fitted values are fitted to --records and "
                  "--time is planned from it, not from the files here (a sample under --path-map)")
    add_json(p, "print the job record as one JSON document")
    search = p.add_argument_group("--action automl", "what the study searches (as `skillbank automl`; the job always passes --resume)")
    add_search_arguments(search)
    add_metric_argument(search)
    add_storage_argument(search)
    p.set_defaults(run=run_submit)

    jobs = command_parser(sub, "jobs", raw=False)
    verbs = jobs.add_subparsers(dest="verb", metavar="VERB", required=True)
    v = verbs.add_parser("status", help="refresh and print the job's status document: its record and its run's progress",
                         description=STATUS_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    v.add_argument("job", metavar="JOB", help="job id (printed by submit, attach or a foreground train) or path of <results_dir>/jobs/<id>.json")
    v.add_argument("--results-dir", default=None, help="where to look for jobs/<id>.json besides the job index")
    v.add_argument("--watch", action="store_true", help="print the document again each time it changes, until the job ends (JSON lines with --json)")
    v.add_argument("--interval", type=float, default=10.0, metavar="S", help="--watch: seconds between two looks (default 10)")
    add_json(v, "print the document as one JSON document (with --watch: one per line, each time it changes)")
    v.set_defaults(run=run_status)
    for name, fn, text in (
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
            add_json(v, "print the record as one JSON document")
        v.set_defaults(run=fn)
    v = verbs.add_parser("wait", help="block until the job ends; exit 0 succeeded, 1 failed or cancelled, 2 no such job, 3 timeout, 4 end unknown",
                         description=WAIT_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    v.add_argument("job", metavar="JOB", help="job id (printed by submit or attach) or path of <results_dir>/jobs/<id>.json")
    v.add_argument("--timeout", type=float, default=None, metavar="S", help="give up after S seconds (exit 3; the job goes on). Default: wait as long as it takes")
    v.add_argument("--results-dir", default=None, help="where to look for jobs/<id>.json besides the job index")
    add_json(v, "print one JSON document at the end (keys above)")
    v.set_defaults(run=run_wait)
    v = verbs.add_parser("attach", help="record a Slurm job submitted by hand (sbatch job.sbatch in a rendered job folder) so status, logs, cancel and wait follow it",
                         description=ATTACH_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    v.add_argument("dir", metavar="DIR", nargs="?", default=None, help="the job folder (as --job-dir)")
    v.add_argument("--job-dir", default=None, metavar="DIR", help="the job folder skillbank rendered (job.sbatch, spec copy, job.json), wherever it was copied")
    v.add_argument("--slurm-id", default=None, metavar="N", help="the id sbatch printed (default: N of the newest slurm-<N>.out in the folder)")
    add_json(v, "print the record as one JSON document")
    v.set_defaults(run=run_attach)
    v = verbs.add_parser(
        "diagnose",
        help="what happened to a training run, launched by skillbank or not: state, cause, last complete checkpoint, resume command",
        description=DIAGNOSE_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    v.add_argument("dir", metavar="DIR|JOB", help="a job id, a job folder or its record (<results_dir>/jobs/<id>[.json]), a run folder "
                   "(skillbank's or cosmos-rl's <output_dir>/<timestamp>), an output_dir, a --log-dir folder (a Slurm run's cosmos-rl-logs, "
                   "one node_<i>, logs_latest/, one logs_<time>)")
    v.add_argument("--results-dir", default=None, help="where to look for a job id's jobs/<id>.json besides the job index")
    v.add_argument("--stale-after", type=float, default=None, metavar="S",
                   help="logs unchanged for S seconds mean the run is not running (default 600)")
    add_json(v, "print one JSON document (keys below)")
    v.set_defaults(run=run_diagnose)
    v = verbs.add_parser("list", help="known jobs, newest first, with their last recorded status", description="Jobs in the index (and under --results-dir), with the status last written to each record (`jobs status` refreshes one).")
    v.add_argument("--results-dir", default=None)
    v.add_argument("--json", action="store_true")
    v.set_defaults(run=run_list)
    v = verbs.add_parser("schema", help="print the JSON Schema of a job record")
    v.add_argument("-o", "--output", default=None, metavar="FILE", help="write it to FILE instead")
    v.set_defaults(run=run_schema)
    v = verbs.add_parser("attempt", help="job.sbatch's attempt bookkeeping (platform.requeue): begin at each start; signal on USR1 before --time "
                         "(exit 0: requeue the job, 1: this attempt wrote no new checkpoint, the job ends failed)")
    v.add_argument("event", choices=("begin", "signal"))
    v.add_argument("--job-dir", required=True, metavar="DIR")
    v.add_argument("--run-dir", default=None, metavar="DIR", help="the run the no-progress guard judges (none for a study)")
    v.add_argument("--limit-s", type=int, default=None, metavar="S", help="the job's --time in seconds")
    v.add_argument("--lead-s", type=int, default=300, metavar="S", help="the signal's lead (#SBATCH --signal=B:USR1@S)")
    v.set_defaults(run=run_attempt)


def run_attempt(args: argparse.Namespace) -> int:
    import sys
    from pathlib import Path

    from skillbank.platform import requeue
    from skillbank.runs.record import now

    if args.event == "begin":
        entry = requeue.begin(Path(args.job_dir), args.run_dir, now=now())
        print(f"skillbank: attempt {entry['attempt']} begins; newest complete checkpoint: step {entry['checkpoint_at_start']}", flush=True)
        return 0
    again, line = requeue.signal(Path(args.job_dir), args.run_dir, limit_s=args.limit_s, lead_s=args.lead_s, now=now())
    print(f"skillbank: {line}", file=sys.stdout if again else sys.stderr, flush=True)
    return 0 if again else 1


def _print_record(record: Any, path: Any, as_json: bool, headline: str, study: dict | None = None, loop: dict | None = None) -> None:
    """The record (an AutoML job's: with its study's trials, `skillbank automl --status`'s summary; a DEFT
    job's: with its loop's progress, deft.state.progress)."""
    if as_json:
        print(json.dumps({"ok": True, "record_path": str(path), "progress": record.progress.model_dump(mode="json") if record.progress else None,
                          "record": record.model_dump(mode="json"), **({"study": study} if study is not None else {}),
                          **({"deft": loop} if loop is not None else {})}, indent=2, default=str))
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
    if record.outputs.deft_dir:
        print(f"  deft:    {record.outputs.deft_dir}  (state.json, report.html; re-submit the config to resume)")
    for fit in record.fitted:
        print(f"  fitted:  {fit.get('key')} {fit.get('from')} -> {fit.get('to')} ({fit.get('where')}, {fit.get('records')} records)")
    for note in record.notes:
        print(f"  note:    {note}")
    for line in record.preflight.get("check_on_node", []):
        print(f"  check on the node: {line}")
    if record.preflight.get("warning_findings"):
        from skillbank.preflight.report import finding_line

        for finding in record.preflight["warning_findings"]:
            print(f"  preflight warning: {finding_line(finding)}")
    if loop is not None:
        print(f"  loop:    {loop['error']}" if not loop.get("ok") else
              f"  loop:    {loop['status']}, {loop['stages_done']} stage(s) done, round {loop['rounds']} decided"
              + (f", running {', '.join(loop['running'])}" if loop["running"] else "")
              + (f", stopped: {loop['stop']['reason']}" if loop.get("stop") else ""))
    if study is not None:
        from skillbank.automl.status import lines

        print(*(["  " + line for line in lines(study)] if study.get("ok") else [f"  study:   {study['error']}"]), sep="\n")


def deft_of(record: Any) -> dict | None:
    """A DEFT job's loop as its state.json says (None for other jobs)."""
    if record.action != "deft" or not record.outputs.deft_dir:
        return None
    from pathlib import Path

    from skillbank.deft.state import progress

    return progress(Path(record.outputs.deft_dir))


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
    from skillbank.specification.pathmap import PathMap

    from skillbank.commands.flags import check_described, described

    check_described(args)
    from skillbank.platform.retry import retry_arguments

    retry = retry_arguments(args)  # --retry-of: the job's spec, options and run, its bad nodes excluded
    options = Options(image=args.image, partition=args.partition, account=args.account, time=args.time, shm_size=args.shm_size, exclude=args.exclude)
    record, path = submit(
        platform=args.platform, spec_path=spec_or_config(args), backend=args.backend, skill=args.skill,
        nodes=args.nodes, gpus_per_node=args.gpus_per_node, options=options, dry_run=args.dry_run, automl=automl_job(args),
        paths=PathMap.parse(args.path_map), recorded_map=args.dry_run or args.platform == "slurm",
        action=args.action if args.action != "automl" else "train", model_family=args.model_family, resume_from=args.resume_from,
        described=described(args), resume_run=args.resume_run, time_limit=args.time_limit,
    )
    if retry:
        record.notes[:0] = retry
        from skillbank.runs import record as rec

        rec.save(record, index=not record.dry_run)
    if args.dry_run:
        headline = f"job {record.id}: rendered for {record.platform} ({record.backend}); nothing was submitted\n{record.script}"
    else:
        headline = f"job {record.id}: {record.action} submitted to {record.platform} ({record.backend}), {record.external_kind} {record.external_id}"
        headline += f"\n  next:    skillbank jobs wait {record.id}   |   skillbank jobs status {record.id}   |   skillbank jobs logs {record.id}"
    _print_record(record, path, args.json, headline)
    return 0


def spec_or_config(args: argparse.Namespace) -> str:
    """The file a job starts from: --spec (train, automl, rl) or --config (deft)."""
    from skillbank.errors import InputError

    if args.action == "deft":
        if args.spec or not args.config:
            raise InputError("--action deft submits a DEFT config: --config deft.yaml (its train_spec names the train spec)", where="--config" if not args.config else "--spec",
                             fix="skillbank submit --action deft --platform P --config DIR/deft.yaml (from `skillbank deft init`)")
        return args.config
    if args.config or not args.spec:
        raise InputError("--config names a DEFT config (--action deft)" if args.config else f"--action {args.action} needs --spec FILE",
                         where="--config" if args.config else "--spec", fix="add --action deft" if args.config else "pass --spec FILE")
    return args.spec


def automl_job(args: argparse.Namespace) -> Any:
    """The study of --action automl (None for train); search flags with --action train are an input error."""
    from pathlib import Path

    from skillbank.errors import InputError
    from skillbank.platform.context import AutomlJob

    given = [flag for flag, value, default in (
        ("--algorithm", args.algorithm, DEFAULT_ALGORITHM), ("--max-trials", args.max_trials, DEFAULT_TRIALS),
        ("--metric", args.metric, DEFAULT_METRIC), ("--param", args.param, None), ("--range", args.range, []),
        ("--choices", args.choices, []), ("--search", args.search, []), ("--study", args.study, None), ("--storage", args.storage, None)) if value != default]
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
        search=tuple(args.search),
        storage=args.storage,
    )


def run_status(args: argparse.Namespace) -> int:
    from skillbank.platform.submit import status

    if args.watch:
        return _watch(args)
    record, path = status(args.job, args.results_dir)
    _print_record(record, path, args.json, _headline(record), study=study_of(record), loop=deft_of(record))
    return 0


def _headline(record: Any) -> str:
    from skillbank.runs.progress import line

    when = f", ended {record.ended}" if record.ended else (f", started {record.started}" if record.started else "")
    code = f", exit {record.exit_code}" if record.exit_code is not None else ""
    where = "foreground" if record.kind == "foreground" else record.platform
    said = f"job {record.id}: {record.status} on {where} ({record.backend}){when}{code}"
    ended = [f"{a.get('attempt')}: {a['why_ended']}" for a in record.attempts if a.get("why_ended")]
    tries = f"\n  attempts: {len(record.attempts)}" + (f" (ended: {', '.join(ended)})" if ended else "") if len(record.attempts) > 1 or ended else ""
    return said + tries + (f"\n  progress: {line(record.progress)}" if record.progress is not None and record.outputs.run_dir else "")


def _watch(args: argparse.Namespace) -> int:
    """`jobs status --watch`: the document each time it changes (status or progress), until the job ends."""
    import time

    from skillbank.errors import InputError
    from skillbank.platform.submit import status
    from skillbank.runs.record import FINAL

    if args.interval <= 0:
        raise InputError("--interval must be positive", where="--interval")
    last = None
    while True:
        record, path = status(args.job, args.results_dir)
        doc = {"ok": True, "record_path": str(path), "status": record.status, "progress": record.progress.model_dump(mode="json") if record.progress else None}
        shown = json.dumps({k: v for k, v in doc.items()}, sort_keys=True, default=str)
        if shown != last:
            last = shown
            if args.json:
                print(json.dumps({**doc, "time": time.time()}, default=str), flush=True)
            else:
                print(f"{time.strftime('%H:%M:%S')} {_headline(record)}", flush=True)
        if record.status in FINAL or record.dry_run:
            return 0
        time.sleep(args.interval)


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


def run_wait(args: argparse.Namespace) -> int:
    import sys
    import time

    from skillbank.errors import InputError
    from skillbank.platform.submit import WAIT_EXIT, wait

    if args.timeout is not None and args.timeout < 0:
        raise InputError("--timeout must be at least 0", where="--timeout")
    t0 = time.monotonic()

    def said(record: Any) -> None:
        print(f"job {record.id}: {record.status}", file=sys.stderr, flush=True)

    record, path, outcome = wait(args.job, timeout_s=args.timeout, results_dir=args.results_dir, on_change=said)
    code = WAIT_EXIT[outcome]
    if args.json:
        print(json.dumps({"ok": outcome == "succeeded", "outcome": outcome, "exit": code, "waited_s": round(time.monotonic() - t0, 1),
                          "record_path": str(path), "progress": record.progress.model_dump(mode="json") if record.progress else None,
                          "record": record.model_dump(mode="json")}, indent=2))
        return code
    if outcome == "timeout":
        headline = f"job {record.id}: still {record.status} after {args.timeout:g} s (not waited for longer; it goes on)"
    else:
        headline = _headline(record)
        if outcome != "succeeded":
            headline += f"\n  next:    skillbank jobs logs {record.id}"
    _print_record(record, path, False, headline)
    return code


def run_attach(args: argparse.Namespace) -> int:
    from skillbank.errors import InputError
    from skillbank.platform.attach import attach

    folders = {d for d in (args.dir, args.job_dir) if d}
    if len(folders) != 1:
        raise InputError("name the job folder once" if folders else "which job folder?", where="--job-dir",
                         fix="skillbank jobs attach --slurm-id N --job-dir DIR (or: skillbank jobs attach DIR)")
    record, path = attach(folders.pop(), args.slurm_id)
    headline = f"job {record.id}: attached to Slurm job {record.external_id}, {record.status}"
    headline += f"\n  next:    skillbank jobs wait {record.id}   |   skillbank jobs logs {record.id}"
    _print_record(record, path, args.json, headline)
    return 0


def run_list(args: argparse.Namespace) -> int:
    from skillbank.runs import record as rec

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
    from skillbank.platform.diagnose import STALE_AFTER_S
    from skillbank.platform.diagnose_job import diagnose_any

    diag = diagnose_any(args.dir, results_dir=args.results_dir, stale_after_s=STALE_AFTER_S if args.stale_after is None else args.stale_after)
    if args.json:
        print(json.dumps({"ok": True, **diag.to_dict()}, indent=2))
    else:
        print("\n".join(diag.lines()))
    return diag.exit_code


def run_schema(args: argparse.Namespace) -> int:
    from skillbank import atomic
    from skillbank.runs.record import json_schema

    text = json.dumps(json_schema(), indent=2) + "\n"
    if args.output:
        atomic.write_text(args.output, text)
    else:
        print(text, end="")
    return 0
