"""The record of a `skillbank train` (or rl) run: the job record's one shape (skillbank.runs.record, version 2).

A foreground run (started in a shell) writes <results_dir>/jobs/<job_id>.json, kind "foreground": spec
sha256, backend, argv, status (running -> succeeded | failed | cancelled), start and end, the pid, the
run folder once it exists, and the run's progress read from that folder as it goes (last step of total,
losses, the last complete checkpoint), so `skillbank jobs status ID` follows it like a submitted job.
Inside a submitted job (the rendered script exports SKILLBANK_JOB_DIR / SKILLBANK_JOB_ID) the job already
has its record: the run writes its attempt into the job folder instead (skillbank.runs.node), which
`jobs status` merges. Secrets are read by name and never written: every value of HF_TOKEN,
WANDB_API_KEY, AWS_* and friends found in the environment is masked in everything the record holds.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from skillbank import atomic
from skillbank.errors import InputError, RunError
from skillbank.redaction import redact
from skillbank.runs import node, progress, record as rec

PROGRESS_EVERY_S = 5.0  # how often a running job's progress is read into its record


class JobRecord:
    """A foreground run's record on disk (a runs.record.JobRecord); every change is written atomically at once."""

    def __init__(self, path: Path, record: rec.JobRecord):
        self.path = path
        self.record = record
        self._progress_at = 0.0

    @property
    def data(self) -> dict[str, Any]:
        return self.record.model_dump(mode="json")

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
        route: dict[str, Any] | None = None,
        train_output_dir: str | os.PathLike[str] = "",
    ) -> "JobRecord | Attempt":
        """The record of this run: a foreground record, or this attempt of the submitted job it runs in."""
        inside = node.current_job()
        if inside is not None:
            return Attempt(*inside)
        job_id = rec.new_job_id(action)
        spec = Path(spec_path).resolve()
        results = Path(results_dir).resolve()
        record = rec.JobRecord(
            id=job_id, kind="foreground", platform="local", backend=backend, skill=skill, action=action,  # type: ignore[arg-type]
            spec=rec.SpecRef(path=str(spec), sha256=rec.sha256_file(spec)), argv=list(argv), status="running",
            submitted=rec.now(), started=rec.now(), external_kind="pid", external_id=str(os.getpid()), host=socket.gethostname(),
            route=route, outputs=rec.Outputs(results_dir=str(results), job_dir=str(rec.job_dir(results, job_id)),
                                             train_output_dir=str(Path(train_output_dir).expanduser().resolve()) if train_output_dir else ""),
        )
        job = cls(rec.record_path(results, job_id), record)
        job.write()
        return job

    def write(self) -> None:
        atomic.write_json(self.path, redact(self.record.model_dump(mode="json")))
        rec.index_record(self.record.id, self.path)  # `jobs status ID` from anywhere

    def update(self, **fields: Any) -> None:
        """Record what is known: status, pid, reason, the run folder and its logs; the progress is read from the run folder."""
        r = self.record
        for key, value in fields.items():
            value = str(value) if isinstance(value, Path) else value
            if key == "status":
                r.status = "rendered" if value == "dry_run" else value
            elif key == "pid" and value:
                r.external_id = str(value)
            elif key == "reason" and value:
                r.error = redact(str(value))
            elif key == "run_dir" and value:
                r.outputs.run_dir = value
                r.outputs.train_output_dir = r.outputs.train_output_dir or str(Path(value).parent)
            elif key in ("log", "launcher_log") and value:
                r.outputs.log = value
            elif key == "log_dir" and value:
                r.outputs.cosmos_log_dir = value
            elif key == "resume_from" and value:
                r.notes.append(f"started from checkpoint {value}")
            elif key == "uploads":
                r.notes += [f"upload of {u.get('what')} step {u.get('step')} to {u.get('destination')} failed ({u.get('error')}); the local copy is kept"
                            for u in value or [] if u.get("status") == "failed"]
        self._read_progress()
        self.write()

    def fit(self, fits: list[dict[str, Any]]) -> None:
        self.record.fitted.extend(fits)
        self.write()

    def tick(self) -> None:
        """While the run goes: its progress read into the record, at most every PROGRESS_EVERY_S."""
        if time.monotonic() - self._progress_at >= PROGRESS_EVERY_S:
            self._read_progress()
            self.write()

    def _read_progress(self) -> None:
        self._progress_at = time.monotonic()
        if self.record.outputs.run_dir:
            seen = progress.read(self.record.outputs.run_dir)
            seen.state = self.record.status if self.record.status in ("running", "succeeded", "failed", "cancelled") else seen.state  # type: ignore[assignment]
            seen.cause = self.record.error or seen.cause
            self.record.progress = seen

    def finish(self, status: str, *, exit_code: int | None = None, error: str | None = None) -> None:
        if status not in ("succeeded", "failed", "cancelled"):
            raise ValueError(f"status must be succeeded, failed or cancelled, not {status!r}")
        self.record.status, self.record.ended, self.record.exit_code = status, rec.now(), exit_code  # type: ignore[assignment]
        self.record.error = redact(error) if error else self.record.error
        self._read_progress()
        self.write()

    @contextmanager
    def tracking(self) -> Iterator[Any]:
        with _tracking(self):
            yield self


class Attempt(node.Attempt):
    """A run inside a submitted job: its facts go to the job folder's node.json (the job's record is the submitter's)."""

    def __init__(self, job_dir: Path, job_id: str):
        super().__init__(job_dir, job_id, now=rec.now())

    def tick(self) -> None:
        """Nothing to do: `jobs status` reads the run folder itself."""

    def finish(self, status: str, *, exit_code: int | None = None, error: str | None = None, now: str | None = None) -> None:
        super().finish(status, exit_code=exit_code, error=redact(error) if error else None, now=now or rec.now())

    @contextmanager
    def tracking(self) -> Iterator[Any]:
        with _tracking(self):
            yield self


@contextmanager
def _tracking(job: Any) -> Iterator[None]:
    """Finish the record however the job's body ends, so no record stays "running" after the
    command is gone: succeeded; failed with exit 2 (bad input) or 1 (anything else); cancelled on Ctrl-C."""
    try:
        yield
    except KeyboardInterrupt:
        job.finish("cancelled", error="interrupted")
        raise
    except InputError as exc:
        job.finish("failed", exit_code=2, error=str(exc))
        raise
    except Exception as exc:
        job.finish("failed", exit_code=1, error=str(exc) if isinstance(exc, RunError) else f"{type(exc).__name__}: {exc}")
        raise
    job.finish("succeeded", exit_code=0)
