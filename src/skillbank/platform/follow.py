"""A job's one status document: its record, what the job wrote where it ran, and its run's progress.

`jobs status`, `jobs wait` and `jobs status --watch` show the same document: the record as the
platform last answered (status, times, exit code), merged with the job folder's node.json (the
attempts and the values the node re-fitted: skillbank.runs.node), and `progress` read from the run
folder (skillbank.runs.progress: last step of total, last loss, last validation and its step, the last
complete checkpoint, the export, the attempts, the cause). A run folder the record names as the node
sees it (--path-map) is read at its LOCAL path here; one this machine cannot see leaves the progress
at what the record knew.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from skillbank.runs import node, progress
from skillbank.runs.record import JobRecord

STATE = {"submitted": "queued", "rendered": "rendered"}  # record status -> progress state, where they differ


def follow(record: JobRecord) -> JobRecord:
    """The record with node.json merged in and `progress` read from its run folder (nothing is written)."""
    facts = node.read(record.outputs.job_dir) if record.kind == "submit" else {}
    if facts.get("attempts"):
        record.attempts = list(facts["attempts"])
    if facts.get("fitted"):
        record.fitted = [f for f in record.fitted if f.get("where") != "node"] + [{**f, "where": "node"} for f in facts["fitted"]]
    run_dir = run_dir_here(record)
    seen = progress.read(run_dir) if run_dir is not None else progress.Progress()
    seen.state = STATE.get(record.status, record.status)
    seen.attempts = record.attempts or _current_attempt(record)
    seen.cause = _cause(record, seen)
    record.progress = seen
    return record


def run_dir_here(record: JobRecord) -> Path | None:
    """The record's run folder as this machine sees it (its path map undone), or None."""
    if not record.outputs.run_dir:
        return None
    from skillbank.specification.pathmap import PathMap

    text = PathMap.parse(record.path_map).to_local(record.outputs.run_dir) if record.path_map else record.outputs.run_dir
    path = Path(text)
    if not path.is_absolute():  # a run folder named relative to the job's work directory
        path = Path(record.outputs.results_dir).parent / path
    return path


def _current_attempt(record: JobRecord) -> list[dict[str, Any]]:
    """Before the job wrote node.json: the attempt the platform knows of (none while it is queued or only rendered)."""
    if record.dry_run or record.status in ("rendered", "submitted") and not record.started:
        return []
    return [{"attempt": 0, "started": record.started, "status": record.status, "ended": record.ended, "source": "the platform (the run wrote no node.json yet)"}]


def _cause(record: JobRecord, seen: progress.Progress) -> str | None:
    if record.status == "cancelled":
        return "cancelled (skillbank jobs cancel, scancel, or docker stop)"
    if record.status not in ("failed", "unknown"):
        return None
    guard = next((a["guard"] for a in reversed(record.attempts) if a.get("guard")), None)  # platform.requeue's no-progress guard
    said = guard or seen.cause or record.error
    if said:
        return said
    code = f" with exit code {record.exit_code}" if record.exit_code is not None else ""
    return (f"the job ended{code} before its run reported an outcome (no result.json): `skillbank jobs logs {record.id}` shows its output, "
            f"`skillbank jobs diagnose {record.id}` its logs")
