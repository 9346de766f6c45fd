"""Job records: one JSON file per training job, so agents and people can see what ran and where.

<results_dir>/jobs/<job_id>.json holds the spec's sha256, backend, argv, status (running ->
succeeded | failed | cancelled), start / end times and output paths. Secrets are read by name and never
written: every value of HF_TOKEN, WANDB_API_KEY, AWS_* and friends found in the environment is
masked in everything the record holds (argv, errors, outputs) before it reaches the disk.
The job id, the spec hash and the times come from skillbank.runs.record, like a submitted job's.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from skillbank import atomic
from skillbank.errors import InputError, RunError
from skillbank.runs.record import new_job_id, now, sha256_file
from skillbank.redaction import redact

SCHEMA_VERSION = 1
STATUSES = ("running", "succeeded", "failed", "cancelled", "dry_run")
TOP_LEVEL = {"status", "pid", "backend", "spec", "reason", "error", "exit_code", "route"}


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
        job_id = new_job_id(action)
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

    def finish(self, status: str, *, exit_code: int | None = None, error: str | None = None) -> None:
        if status not in ("succeeded", "failed", "cancelled"):
            raise ValueError(f"status must be succeeded, failed or cancelled, not {status!r}")
        self.data.update(status=status, ended_at=now(), exit_code=exit_code, error=error)
        self.write()

    @contextmanager
    def tracking(self) -> Iterator["JobRecord"]:
        """Finish the record however the job's body ends, so no record stays "running" after the
        command is gone: succeeded; failed with exit 2 (bad input) or 1 (anything else); cancelled on Ctrl-C."""
        try:
            yield self
        except KeyboardInterrupt:
            self.finish("cancelled", error="interrupted")
            raise
        except InputError as exc:
            self.finish("failed", exit_code=2, error=str(exc))
            raise
        except Exception as exc:
            self.finish("failed", exit_code=1, error=str(exc) if isinstance(exc, RunError) else f"{type(exc).__name__}: {exc}")
            raise
        self.finish("succeeded", exit_code=0)
