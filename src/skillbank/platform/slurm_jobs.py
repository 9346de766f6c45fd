"""A Slurm job as the scheduler sees it: `jobs status`, `jobs logs` and `jobs cancel` of the slurm platform.

status asks squeue (queued or running), then `scontrol show job` (a finished job, while the controller
remembers it: MinJobAge), then sacct (where the cluster keeps accounting; a cluster with
accounting_storage/none has none). What it learns (state, exit code, start and end, requeues) goes
into the job record, and a final state stays there: later calls read the record, not Slurm. A
controller that does not answer is an error that leaves the record as it was, never "unknown".

cancel is scancel, then a wait until Slurm reports the job ended with its processes gone (the
COMPLETING phase over), then a look on this machine for processes still marked with the job's
SKILLBANK_JOB_ID (the rendered script exports it; proctrack/linuxproc loses a process that left the
job's process tree), which are stopped.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from skillbank.errors import RunError
from skillbank.platform.base import call, have, tail_file
from skillbank.runs.record import TERMINAL, JobRecord, now

STATES = {
    "PENDING": "submitted", "CONFIGURING": "submitted", "REQUEUED": "submitted", "REQUEUE_HOLD": "submitted",
    "REQUEUE_FED": "submitted", "RESV_DEL_HOLD": "submitted", "SUSPENDED": "running", "RUNNING": "running",
    "COMPLETING": "running", "STAGE_OUT": "running", "SIGNALING": "running", "RESIZING": "running",
    "COMPLETED": "succeeded", "CANCELLED": "cancelled", "FAILED": "failed", "TIMEOUT": "failed",
    "NODE_FAIL": "failed", "OUT_OF_MEMORY": "failed", "PREEMPTED": "failed", "BOOT_FAIL": "failed", "DEADLINE": "failed",
}
CANCEL_WAIT_S = 90.0  # scancel -> the job's processes gone: Slurm's KillWait (30 s by default) + the epilog
REQUEUE_NOTE = "requeued by Slurm"


@dataclass
class SlurmJob:
    """What the scheduler says about a job: its state, and once known, exit code and times."""

    state: str
    exit_code: int | None = None
    started: str | None = None
    ended: str | None = None
    restarts: int = 0
    nodes: str | None = None
    source: str = "squeue"
    name: str | None = None  # scontrol's JobName (skillbank-<job id> for a rendered script)
    submitted: str | None = None

    @property
    def status(self) -> str:
        return STATES.get(self.state.split()[0].rstrip("+"), "unknown")

    @property
    def settled(self) -> bool:
        """Ended, and every process of it gone (Slurm clears COMPLETING once the nodes report it)."""
        return self.status in TERMINAL and self.state != "COMPLETING"


def refresh(record: JobRecord) -> JobRecord:
    """The scheduler's view of the job, written into the record: its status, start and end times, exit
    code, requeues. A final state is kept: later calls read the record without asking Slurm."""
    if record.dry_run or not record.external_id or record.status in TERMINAL:
        return record
    job = query(record.external_id)
    if job is None:
        record.status = "unknown"
        note = (f"Slurm no longer knows job {record.external_id} (squeue, scontrol and sacct are silent: it ended more than "
                "MinJobAge ago on a cluster without accounting); see `skillbank jobs logs` for how it ended")
        if note not in record.notes:
            record.notes.append(note)
        return record
    return apply(record, job)


def apply(record: JobRecord, job: SlurmJob) -> JobRecord:
    record.status = job.status  # type: ignore[assignment]
    record.started = job.started or record.started
    if job.status in TERMINAL:
        record.ended = job.ended or record.ended or now()
        record.exit_code = job.exit_code if job.exit_code is not None else record.exit_code
    if job.restarts:
        record.notes = [n for n in record.notes if not n.startswith(REQUEUE_NOTE)]
        record.notes.append(f"{REQUEUE_NOTE} {job.restarts} time(s): attempt {job.restarts} resumes (SLURM_RESTART_COUNT={job.restarts})")
    return record


def query(job_id: str) -> SlurmJob | None:
    """squeue for a queued or running job (scontrol adds its times and requeues); once it left the
    queue, `scontrol show job` (the controller keeps a finished job MinJobAge seconds), then sacct
    (the accounting history, where the cluster keeps one); None when none of them knows the job.
    A controller that answers neither squeue nor scontrol (after retries) is a RunError: the record
    keeps what it knew rather than calling the job unknown."""
    errors: list[str] = []
    live = _squeue(job_id, errors)
    detail = _scontrol(job_id, errors)
    if len(errors) == 2:
        raise RunError(f"Slurm did not answer about job {job_id}: {errors[-1]}")
    if detail is not None:
        return detail
    if live is not None and live.status not in TERMINAL:
        return live
    return _sacct(job_id) or live


UNKNOWN_JOB = "Invalid job id specified"
RETRIES = (0.5, 1.0, 2.0)  # a busy controller times out now and then: ask again before giving up


def _ask(argv: list[str], errors: list[str]) -> str | None:
    """stdout of a squeue / scontrol query; None when the job is unknown to it, or after the retries
    (the last error appended to `errors`)."""
    for pause in (*RETRIES, None):
        try:
            return call(argv, what=argv[0]).strip()
        except RunError as exc:
            if UNKNOWN_JOB in str(exc):
                return None
            if pause is None or "fatal:" in str(exc):  # fatal: no configuration, no controller named: asking again won't help
                errors.append(str(exc))
                return None
            time.sleep(pause)
    return None


def _squeue(job_id: str, errors: list[str]) -> SlurmJob | None:
    if not have("squeue"):
        errors.append("squeue is not on PATH")
        return None
    out = _ask(["squeue", "-h", "-j", job_id, "-o", "%T"], errors)  # a finished job leaves squeue
    return SlurmJob(state=out.splitlines()[0].strip()) if out else None


def _scontrol(job_id: str, errors: list[str]) -> SlurmJob | None:
    if not have("scontrol"):
        errors.append("scontrol is not on PATH")
        return None
    out = _ask(["scontrol", "-o", "show", "job", job_id], errors)
    if not out:
        return None
    fields = dict(item.split("=", 1) for item in out.split() if "=" in item)
    if fields.get("JobId") != job_id or "JobState" not in fields:
        return None
    restarts = fields.get("Restarts", "0")
    return SlurmJob(
        state=fields["JobState"], exit_code=_exit_code(fields.get("ExitCode", "")), started=_utc(fields.get("StartTime")),
        ended=_utc(fields.get("EndTime")), restarts=int(restarts) if restarts.isdigit() else 0,
        nodes=fields.get("NodeList") or None, source="scontrol", name=fields.get("JobName") or None,
        submitted=_utc(fields.get("SubmitTime")),
    )


def _sacct(job_id: str) -> SlurmJob | None:
    if not have("sacct"):
        return None
    try:
        out = call(["sacct", "-j", job_id, "-X", "-n", "-P", "-o", "State,ExitCode,Start,End,NodeList"], what="sacct").strip()
    except RunError:
        return None  # e.g. "Slurm accounting storage is disabled"
    if not out:
        return None
    state, code, start, end, nodes = (out.splitlines()[0].split("|") + [""] * 5)[:5]
    return SlurmJob(state=state, exit_code=_exit_code(code), started=_utc(start), ended=_utc(end), nodes=nodes or None, source="sacct")


def _exit_code(text: str) -> int | None:
    """Slurm's `code:signal` as one exit code: the code, or 128 + the signal that ended the script."""
    code, _, sig = text.partition(":")
    if not code.isdigit():
        return None
    return int(code) or (128 + int(sig) if sig.isdigit() and int(sig) else 0)


def _utc(text: str | None) -> str | None:
    """Slurm's local `YYYY-MM-DDTHH:MM:SS` as UTC ISO-8601; None for Unknown / None / empty."""
    if not text or not text[:1].isdigit():
        return None
    try:
        return datetime.fromisoformat(text).astimezone(timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")
    except ValueError:
        return None


def logs(record: JobRecord, tail: int) -> str:
    """The batch output (every attempt appends to it: --open-mode=append)."""
    if not record.external_id:
        return ""
    return tail_file(Path(record.outputs.job_dir) / f"slurm-{record.external_id}.out", tail)


def cancel(record: JobRecord, wait_s: float = CANCEL_WAIT_S) -> JobRecord:
    """scancel, then wait until Slurm reports the job ended with no process left on its nodes (its
    COMPLETING phase over); on this machine, a process still marked with the job's id is stopped too
    (a process that left the job's tree, where proctrack cannot follow it)."""
    record = refresh(record)
    if record.status in TERMINAL or not record.external_id:
        return record
    call(["scancel", record.external_id], what="scancel")
    deadline = time.monotonic() + wait_s
    job = query(record.external_id)
    while job is not None and not job.settled and time.monotonic() < deadline:
        time.sleep(0.5)
        job = query(record.external_id)
    if job is None:
        record.status = "cancelled"
        record.ended = record.ended or now()
    else:
        record = apply(record, job)
        if not job.settled:
            record.notes.append(f"scancel sent; Slurm still reports {job.state} after {wait_s:.0f} s: `skillbank jobs status {record.id}` shows when it ends")
    left = stop_leftovers(record.id)
    if left:
        record.notes.append(f"stopped {left} process(es) of the job left on this machine after Slurm ended it")
    return record


def leftovers(job_id: str) -> list[Any]:
    """Processes on this machine whose environment carries SKILLBANK_JOB_ID=job_id (the script exports
    it; every step and its children inherit it)."""
    import psutil

    me = psutil.Process()
    mine = {me.pid, *(p.pid for p in me.parents())}  # `jobs cancel` run from inside the job itself
    found = []
    for proc in psutil.process_iter():
        try:
            if proc.pid not in mine and proc.environ().get("SKILLBANK_JOB_ID") == job_id:
                found.append(proc)
        except (psutil.Error, OSError):
            continue
    return found


def stop_leftovers(job_id: str) -> int:
    from skillbank import procs

    left = leftovers(job_id)
    if left:
        procs.terminate(left)
        procs.kill(procs.wait_gone(left, 10.0))
    return len(left)
