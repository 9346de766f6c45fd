"""`skillbank jobs diagnose` on anything: a job id, a job folder or its record, a run folder, a log folder.

The job record is read first when there is one (given as a job id, a job folder, a record, or found
from a job's run folder <train.output_dir>/<job id>/<stamp> or its run root): the platform answers first (Slurm's
own state from squeue / scontrol / sacct where they answer), then the run folder's logs are read
(platform.diagnose). The record wins where it knows better: a cancelled job is cancelled whatever its
logs say, and a stale log never blames a time limit or the OOM killer for it; a job the scheduler
ended as failed is failed even when its last log lines look fine. Nothing is written.

Exit codes (EXIT_CODES; `jobs diagnose --help` lists them): 0 the run finished or is running fine,
1 it failed, 2 bad input (no such job or folder), 3 it was cancelled, 4 nothing to judge yet (queued,
nothing logged) or its end is unknown.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from skillbank.errors import InputError, RunError
from skillbank.platform.diagnose import STALE_AFTER_S, Diagnosis, diagnose
from skillbank.runs import record as rec

JOB_ID = re.compile(r"^(train|automl|rl)-\d{8}-\d{6}-[0-9a-f]{6}$")  # runs.record.new_job_id's shape
EXIT_CODES = {"finished": 0, "running": 0, "failed": 1, "cancelled": 3, "unknown": 4, "queued": 4}
FIX = "pass a job id, a job folder, a run folder (<output_dir>/<timestamp>, or a job's <output_dir>/<job id>/<stamp> or its run root), or a cosmos-rl --log-dir folder"


def diagnose_any(target: str, *, results_dir: str | None = None, stale_after_s: float = STALE_AFTER_S) -> Diagnosis:
    """Diagnose what `target` names; raises InputError (exit 2) when it names nothing readable."""
    record, record_path = _record_of(target, results_dir)
    folder = _folder(target, record)
    if record is not None and record.status == "cancelled":
        stale_after_s = float("inf")  # a cancelled job's logs stopped because it was cancelled, not killed by a limit
    diag = _read(folder, record, stale_after_s)
    if record is not None:
        diag = _with_record(diag, record, record_path)
    diag.exit_code = EXIT_CODES.get(diag.state, 1)
    return diag


def _record_of(target: str, results_dir: str | None) -> tuple[rec.JobRecord | None, Path | None]:
    """The job record `target` names or implies, refreshed by its platform (None when it has none)."""
    path = Path(target).expanduser()
    candidates: list[str] = []
    if path.is_file() and path.suffix == ".json":
        candidates.append(str(path))
    elif path.is_dir() and (path / rec.FOLDER_FACTS).is_file():
        candidates += [str(path.parent / f"{path.name}.json"), path.name]  # a job folder: the record beside it, or by id
    elif path.is_dir():  # a run folder named after its job, or a log folder inside one
        candidates += [p.name for p in [path.resolve(), *path.resolve().parents][:5] if JOB_ID.match(p.name)]
    elif os.sep not in target:
        candidates.append(target)  # a job id
    for candidate in candidates:
        try:
            record, found = rec.find(candidate, results_dir)
        except InputError:
            continue
        return _refreshed(record), found
    if path.exists():
        return None, None
    raise InputError(f"{target!r} is neither a folder nor a known job", where=target, fix=FIX)


def _refreshed(record: rec.JobRecord) -> rec.JobRecord:
    """The platform's answer and the run's progress (a platform that does not answer from here leaves the record as it was)."""
    from skillbank.platform.submit import refresh

    try:
        return refresh(record)
    except (RunError, InputError):
        return record


def _folder(target: str, record: rec.JobRecord | None) -> Path | None:
    """The folder whose logs to read: the one given (unless it is a job folder), else the record's run folder."""
    path = Path(target).expanduser()
    if path.is_dir() and not (path / rec.FOLDER_FACTS).is_file():
        return path
    if record is None:
        return None
    from skillbank.platform.follow import run_dir_here

    run = run_dir_here(record)
    return run if run is not None and run.is_dir() else None


def _read(folder: Path | None, record: rec.JobRecord | None, stale_after_s: float) -> Diagnosis:
    if folder is None:
        if record is None:
            raise InputError("nothing to diagnose", where="DIR", fix=FIX)
        where = record.outputs.run_dir or record.outputs.study_dir or record.outputs.job_dir
        return Diagnosis(path=str(where), state="unknown", cause=None, last_step=None, total_steps=None, last_complete_checkpoint=None,
                         resume_command=None, run_dir=record.outputs.run_dir, launched_by=f"skillbank-{record.backend}",
                         notes=[f"the run folder {where} is not readable here (not started yet, or on another machine)"])
    try:
        return diagnose(folder, stale_after_s=stale_after_s, **_shape(record))
    except ValueError as exc:
        if record is None:
            raise InputError(str(exc), where=str(folder), fix=FIX) from None
        return Diagnosis(path=str(folder), state="unknown", cause=None, last_step=None, total_steps=None, last_complete_checkpoint=None,
                         resume_command=None, run_dir=str(folder), launched_by=f"skillbank-{record.backend}", notes=[str(exc)])


def _shape(record: rec.JobRecord | None) -> dict[str, Any]:
    """A job's node list (its batch log), GPUs per node and batch log: what maps a blamed rank or node folder to its host."""
    if record is None or record.platform != "slurm" or not record.external_id:
        return {}
    from skillbank.platform.bad_nodes import node_list

    log = Path(record.outputs.job_dir) / f"slurm-{record.external_id}.out"
    return {"hosts": node_list(log), "gpus_per_node": record.gpus_per_node or 1, "extra_logs": [log]}


def _with_record(diag: Diagnosis, record: rec.JobRecord, path: Path | None) -> Diagnosis:
    """The record first: cancelled is cancelled; a failed or succeeded end is the job's; Slurm's own state shown."""
    diag.job_id, diag.record_status = record.id, record.status
    diag.scheduler = _scheduler(record)
    if path is not None:
        diag.notes.append(f"job record: {path}")
    if record.status == "cancelled":
        diag.state, diag.cause, diag.fix = "cancelled", "the job was cancelled (skillbank jobs cancel, scancel or docker stop)", None
        diag.known_causes, diag.oom_plan = [], None
    elif record.status == "failed" and diag.state in ("running", "finished", "unknown"):
        said = record.progress.cause if record.progress is not None else None
        diag.state, diag.cause = "failed", diag.cause or said or f"the job ended as failed (exit code {record.exit_code}); the run's logs show no error"
    elif record.status == "succeeded" and diag.state in ("running", "unknown"):
        diag.state = "finished"
    elif record.status == "submitted" and diag.state == "unknown":
        diag.state, diag.cause = "queued", "the job waits for its allocation (nothing logged yet)"
    elif record.status in ("submitted", "running") and diag.state == "failed" and diag.cause and "without an error in the logs" in diag.cause:
        diag.notes.append(f"the platform still reports the job {record.status}: its logs are quiet, not necessarily dead")
    if diag.bad_nodes and record.platform == "slurm" and record.action == "train":
        diag.notes.append(f"retry without {', '.join(n['node'] for n in diag.bad_nodes)}: skillbank submit --platform slurm --retry-of {record.id}")
    if diag.state in ("failed", "cancelled") and diag.resume_command and record.kind == "submit":
        diag.notes.append(f"resubmit the same job folder (a requeue continues its run): cd {record.outputs.job_dir} && sbatch job.sbatch"
                          if record.platform == "slurm" else f"or submit the spec again: skillbank submit --platform {record.platform} --spec {record.spec.path}")
    return diag


def _scheduler(record: rec.JobRecord) -> dict[str, Any] | None:
    """Slurm's own view of the job where its tools answer (squeue, scontrol, sacct)."""
    if record.platform != "slurm" or not record.external_id:
        return None
    from skillbank.platform import slurm_jobs

    try:
        job = slurm_jobs.query(record.external_id)
    except (RunError, InputError) as exc:
        return {"source": "none", "state": None, "error": str(exc)}
    if job is None:
        return {"source": "none", "state": None, "note": "squeue, scontrol and sacct no longer know the job"}
    return {"source": job.source, "state": job.state, "exit_code": job.exit_code, "restarts": job.restarts, "nodes": job.nodes}
