"""What a submitted job wrote where it ran: `<job folder>/node.json`.

A job's record lives beside its job folder on the submitting machine, and `jobs status` rewrites it
there; the job itself (on a Slurm node, in a container, in a detached process) must not race that
writer. So the job writes its own facts into its job folder instead, atomically, and every
`jobs status` / `jobs wait` merges them into the record:

    {"attempts": [{"attempt", "started", "host", "slurm_job_id", "run_dir", "ended", "status", "error",
                   "why_ended", "checkpoint_at_start", "checkpoint_at_end", "guard"}],
     "fitted":   [{"key", "from", "to", "why", "where": "node", "records"}]}

`skillbank train` writes it when it runs inside a submitted job (the rendered scripts export
SKILLBANK_JOB_DIR and SKILLBANK_JOB_ID; SKILLBANK_ATTEMPT, from Slurm's SLURM_RESTART_COUNT, numbers the
attempt). An attempt is one start of the job's command: a requeued Slurm job adds one. A Slurm job's script
writes into the same entries (platform.requeue): why each attempt ended (time_limit, preempted,
requeued_by_hand), the newest complete checkpoint at its start and end, and the no-progress guard's reason.
"""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path
from typing import Any

from skillbank import atomic

NODE_FILE = "node.json"
JOB_DIR_ENV, JOB_ID_ENV, ATTEMPT_ENV = "SKILLBANK_JOB_DIR", "SKILLBANK_JOB_ID", "SKILLBANK_ATTEMPT"
JOB_FACTS = "job.json"  # runs.record.FOLDER_FACTS: what marks a folder as a job folder


def read(job_dir: str | Path) -> dict[str, Any]:
    """The job folder's node.json ({} when the job has not started anywhere yet)."""
    try:
        data = json.loads((Path(job_dir) / NODE_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def current_job() -> tuple[Path, str] | None:
    """(job folder, job id) when this process runs inside a submitted job (its folder found and marked), else None."""
    folder, job_id = os.environ.get(JOB_DIR_ENV), os.environ.get(JOB_ID_ENV)
    if not folder or not job_id or not (Path(folder) / JOB_FACTS).is_file():
        return None
    return Path(folder), job_id


def attempt_number() -> int:
    text = os.environ.get(ATTEMPT_ENV) or os.environ.get("SLURM_RESTART_COUNT") or "0"
    return int(text) if text.isdigit() else 0


class Attempt:
    """This process's attempt of a submitted job, kept in the job folder's node.json; the same
    interface as the foreground record (training.jobrecord): update, fit, finish."""

    def __init__(self, job_dir: Path, job_id: str, *, now: str):
        self.job_dir, self.job_id, self.path = job_dir, job_id, job_dir / NODE_FILE
        self.number = attempt_number()
        begun = next((a for a in read(job_dir).get("attempts", []) if a.get("attempt") == self.number), {})  # job.sbatch's hook (platform.requeue)
        self.entry: dict[str, Any] = {"attempt": self.number, "started": begun.get("started", now), "host": socket.gethostname(), "pid": os.getpid(),
                                      **({"slurm_job_id": os.environ["SLURM_JOB_ID"]} if os.environ.get("SLURM_JOB_ID") else {}),
                                      "status": "running"}
        self._write()

    def _write(self, **changes: Any) -> None:
        """node.json with this attempt's entry merged over what is on disk (the job script's hook writes why the attempt
        ended, the guard's reason and the checkpoint marks into the same entry: they are kept)."""
        data = read(self.job_dir)
        data.update(changes)
        others = [a for a in data.get("attempts", []) if a.get("attempt") != self.number]
        disk = next((a for a in data.get("attempts", []) if a.get("attempt") == self.number), {})
        merged = {**disk, **self.entry}
        if disk.get("status") in ("requeued", "failed") and disk.get("why_ended"):
            merged["status"] = disk["status"]  # the hook decided how this attempt ended: a kill afterwards does not rename it
        data["attempts"] = sorted([*others, merged], key=lambda a: a.get("attempt", 0))
        atomic.write_json(self.path, data)

    def update(self, **fields: Any) -> None:
        """Facts of this attempt (run_dir, ...); anything a foreground record keeps elsewhere is ignored here."""
        for key in ("run_dir", "status", "error", "reason"):
            if fields.get(key) is not None:
                self.entry["error" if key == "reason" else key] = str(fields[key])
        self._write()

    def fit(self, fits: list[dict[str, Any]]) -> None:
        """Values re-fitted on the node: appended to node.json's `fitted` (once per attempt and key)."""
        data = read(self.job_dir)
        seen = {(f.get("attempt"), f.get("key")) for f in data.get("fitted", [])}
        new = [{**f, "attempt": self.number} for f in fits if (self.number, f.get("key")) not in seen]
        self._write(fitted=[*data.get("fitted", []), *new])

    def finish(self, status: str, *, exit_code: int | None = None, error: str | None = None, now: str) -> None:
        self.entry.update(status=status, ended=now, exit_code=exit_code, **({"error": error} if error else {}))
        self._write()
