"""Job records: one JSON file per training job, so agents and people can see what ran and where.

<results_dir>/jobs/<job_id>.json holds the spec's sha256, backend, argv, status (running ->
succeeded | failed | cancelled), start / end times and output paths. Secrets are read by name and never
written: every value of HF_TOKEN, WANDB_API_KEY, AWS_* and friends found in the environment is
masked in everything the record holds (argv, errors, outputs) before it reaches the disk.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import socket
import time
from pathlib import Path
from typing import Any

from skillbank import atomic
from skillbank.redaction import redact

SCHEMA_VERSION = 1
STATUSES = ("running", "succeeded", "failed", "cancelled", "dry_run")
TOP_LEVEL = {"status", "pid", "backend", "spec", "reason", "error", "exit_code", "route"}


def sha256_file(path: str | os.PathLike[str]) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


class JobRecord:
    """A job's record on disk; every change is written atomically at once."""

    def __init__(self, path: Path, data: dict[str, Any]):
        self.path = path
        self.data = data

    @classmethod
    def start(
        cls,
        *,
        action: str,
        backend: str,
        spec_path: str | os.PathLike[str],
        argv: list[str],
        results_dir: str | os.PathLike[str],
        skill: str = "tao-finetune-cosmos-reason",
        outputs: dict[str, Any] | None = None,
        extra: dict[str, Any] | None = None,
    ) -> "JobRecord":
        job_id = f"{action}-{time.strftime('%Y%m%d%H%M%S')}-{secrets.token_hex(3)}"
        spec = Path(spec_path).resolve()
        data = {
            "schema_version": SCHEMA_VERSION,
            "job_id": job_id,
            "skill": skill,
            "action": action,
            "backend": backend,
            "spec_path": str(spec),
            "spec_sha256": sha256_file(spec),
            "argv": list(argv),
            "status": "running",
            "started_at": now(),
            "ended_at": None,
            "exit_code": None,
            "error": None,
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "outputs": dict(outputs or {}),
            **(extra or {}),
        }
        record = cls(Path(results_dir).resolve() / "jobs" / f"{job_id}.json", data)
        record.write()
        return record

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> "JobRecord":
        p = Path(path)
        return cls(p, json.loads(p.read_text(encoding="utf-8")))

    @property
    def job_id(self) -> str:
        return self.data["job_id"]

    def write(self) -> None:
        atomic.write_json(self.path, redact(self.data))

    def update(self, **fields: Any) -> None:
        """Record progress: known top-level fields (status, pid, argv, reason, ...) are set as such,
        anything else is an output (run folder, checkpoints, exports, logs)."""
        for key, value in fields.items():
            value = str(value) if isinstance(value, Path) else value
            if key == "status" and value not in STATUSES:
                raise ValueError(f"status must be one of {STATUSES}, not {value!r}")
            if key in TOP_LEVEL:
                self.data[key] = value
            else:
                self.data["outputs"][key] = value
        self.write()

    def set(self, **fields: Any) -> None:
        self.data.update(fields)
        self.write()

    def finish(self, status: str, *, exit_code: int | None = None, error: str | None = None) -> None:
        if status not in ("succeeded", "failed", "cancelled"):
            raise ValueError(f"status must be succeeded, failed or cancelled, not {status!r}")
        self.data.update(status=status, ended_at=now(), exit_code=exit_code, error=error)
        self.write()
