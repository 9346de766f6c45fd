"""The job record: one JSON shape for every job, so an agent watches a local, Docker or Slurm job, and a
foreground `skillbank train`, the same way.

A record lives at `<results_dir>/jobs/<job_id>.json`, beside the job folder `<results_dir>/jobs/<job_id>/`
(the spec copy the job runs from, the rendered command or sbatch script, logs; a foreground run has
none). An index under the cache folder maps job ids to records, so `skillbank jobs status ID` works from
any directory. Records hold names of credentials (`env`), never their values.

Version 2 joined the two shapes that shared `results/jobs/`: the submit record and the foreground
`skillbank train` record (version 1 of training/jobrecord: job_id, started_at, error,
outputs.val_loss_last, ...), which `load` still reads (`from_foreground`). A job that runs elsewhere
writes what happened on its node into its job folder (`node.json`, skillbank.runs.node: attempts,
values re-fitted to the node's data); `jobs status` merges it into the record.
"""

from __future__ import annotations

import json
import os
import secrets
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from skillbank import atomic
from skillbank.errors import InputError
from skillbank.paths import cache_dir
from skillbank.hashing import sha256_file  # noqa: F401 - jobs and records import it from here
from skillbank.runs.progress import Progress

SCHEMA_VERSION = 2  # 2: one shape for submitted jobs and foreground runs (host, error, route, fitted, attempts, progress)
Platform = Literal["local", "docker", "slurm"]
Backend = Literal["local", "cosmos-rl"]
Status = Literal["rendered", "submitted", "running", "succeeded", "failed", "cancelled", "unknown"]
Kind = Literal["submit", "foreground"]
TERMINAL: frozenset[str] = frozenset({"rendered", "succeeded", "failed", "cancelled"})
FINAL: frozenset[str] = frozenset({"succeeded", "failed", "cancelled", "unknown"})  # a launched job that will not change by itself


class SpecRef(BaseModel):
    model_config = ConfigDict(extra="forbid")

    path: str = Field(description="The spec file as given (absolute).")
    sha256: str = Field(description="sha256 of the spec file at submit time.")
    copy_path: str | None = Field(None, description="The copy inside the job folder that the job runs from (null: a foreground run read `path` itself).")


class Outputs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    results_dir: str = Field(description="The spec's results_dir (absolute).")
    job_dir: str = Field(description="Folder of this job: spec copy, rendered command or script, logs.")
    train_output_dir: str = Field(description="The spec's train.output_dir (absolute): run folders go under it.")
    run_dir: str | None = Field(None, description="The run folder, fixed when the job starts: <train_output_dir>/<job id>/<YYYYmmddHHMMSS> (runs.layout.job_run_dir: alone under the job's run root) for a submitted train or rl job "
                                "(every platform, both backends), the folder a foreground run created; null for an AutoML study (its trials' runs are under study_dir).")
    log: str | None = Field(None, description="The job's main log file (local: the train command's output; slurm: the batch output; foreground: the run's train.log or launcher.log).")
    cosmos_log_dir: str | None = Field(None, description="cosmos-rl's --log-dir: slurm: <run_dir>/cosmos-rl-logs with node_<i>/logs_latest/ per node; foreground: <run_dir>/logs.")
    study_dir: str | None = Field(None, description="action automl: the study folder, <results_dir>/automl/<study> (study.db, trials/, best_rec.json); every submit of the same study resumes it.")
    study_storage: str | None = Field(None, description="action automl: the study's --storage URL, shared by the workers of every job that names it (never with a password); None: study.db in study_dir. `jobs status` reads the study from it.")
    deft_dir: str | None = Field(None, description="action deft: the DEFT loop's output_dir (state.json, log.jsonl, round_N/, report.html); every attempt and every submit of the same config resumes it. `jobs status` reads the loop's progress from it.")


class JobRecord(BaseModel):
    """What was submitted, where, and what became of it."""

    model_config = ConfigDict(extra="forbid")

    schema_version: int = SCHEMA_VERSION
    id: str = Field(description="Job id: <action>-<UTC YYYYmmdd-HHMMSS>-<6 hex>.")
    kind: Kind = Field("submit", description="submit: a job `skillbank submit` launched or rendered (or `jobs attach` recorded); "
                       "foreground: a `skillbank train` run in this shell (no job folder; `jobs status` reads its pid and run folder).")
    platform: Platform
    backend: Backend
    skill: str
    action: Literal["train", "automl", "rl", "deft"] = Field("train", description="train: `skillbank train`; automl: `skillbank automl --resume` (a study; its trials run on one machine); rl: GRPO on an rl spec (cosmos-rl on the job folder's TOMLs, or `skillbank rl --backend local`); deft: `skillbank deft --resume` on the job folder's deft.yaml (the DEFT loop; every round trains on the job's node).")
    spec: SpecRef
    argv: list[str] = Field(description="What was (or would be) executed: the train or automl command, `docker run ...`, or `sbatch SCRIPT`.")
    script: str | None = Field(None, description="The rendered file (docker: command.sh, slurm: job.sbatch).")
    status: Status
    dry_run: bool = False
    submitted: str = Field(description="UTC ISO-8601 time of the submit command.")
    started: str | None = None
    ended: str | None = None
    exit_code: int | None = None
    external_kind: Literal["pid", "docker-container", "slurm-job"] | None = None
    external_id: str | None = Field(None, description="Process group id, Docker container id or Slurm job id.")
    nodes: int = 1
    gpus_per_node: int | None = None
    image: str | None = None
    env: list[str] = Field(default_factory=list, description="Names of the variables passed through (values are never recorded).")
    outputs: Outputs
    path_map: list[str] = Field(default_factory=list, description="--path-map LOCAL=REMOTE pairs: the job folder's files, train_output_dir, run_dir, cosmos_log_dir and study_dir name REMOTE (the node's paths); results_dir, job_dir, the spec path and script are where they are on the submitting machine.")
    preflight: dict[str, Any] = Field(default_factory=dict, description="{ran, ok, errors, warnings, runs_on, check_on_node, warning_findings} or {ran: false, reason}; check_on_node lists the environment findings a job that runs elsewhere checks on its node; warning_findings the warnings counted in `warnings`, each as `skillbank preflight --json` lists a finding {check, severity, message, fix, where, group}.")
    host: str | None = Field(None, description="The machine the command ran on (foreground) or that submitted it.")
    error: str | None = Field(None, description="Why it failed or was cancelled, when known (secrets masked).")
    route: dict[str, Any] | None = Field(None, description="foreground train: the router's decision {route, reason, ...}.")
    fitted: list[dict[str, Any]] = Field(default_factory=list, description="Values fitted to the data, in order: {key, from, to, why, where, records}; "
                                         "where: spec (`skillbank spec`, recorded in the spec's fitted block), submit (--records), node (the job's first step re-fitted "
                                         "them to the files where it runs). A value the user set is never changed.")
    attempts: list[dict[str, Any]] = Field(default_factory=list, description="The job's attempts, oldest first, as its node recorded them (node.json in the job folder): "
                                           "{attempt, started, host, slurm_job_id, run_dir, ended, status}; a Slurm job's script adds why_ended (time_limit, preempted, "
                                           "requeued_by_hand), checkpoint_at_start / checkpoint_at_end (the newest complete step) and guard (why the "
                                           "no-progress guard ended the job): platform.requeue.")
    progress: Progress | None = Field(None, description="The run's progress read from its folder at the last `jobs status` / `wait` "
                                      "(skillbank.runs.progress): state, last_step, total_steps, last_loss, last_val_loss, last_val_step, "
                                      "last_complete_checkpoint, export, attempts, cause.")
    notes: list[str] = Field(default_factory=list)


FOLDER_FACTS = "job.json"  # in the job folder: what it is, so a folder that travelled alone can be attached
FACT_FIELDS = ("id", "platform", "backend", "skill", "action", "nodes", "gpus_per_node", "image", "env")
NODE_OUTPUTS = ("train_output_dir", "run_dir", "cosmos_log_dir", "study_dir", "deft_dir")


def folder_facts(record: JobRecord) -> dict[str, Any]:
    """What the job folder says about itself (`job.json`, written once by submit): the record's fields
    that name no path of the submitting machine (the outputs as the node names them) and the spec
    copy's name. `skillbank jobs attach` builds a record from it when the folder travelled alone."""
    data = record.model_dump(mode="json")
    return {
        "schema_version": SCHEMA_VERSION,
        **{key: data[key] for key in FACT_FIELDS},
        "spec_copy": Path(record.spec.copy_path).name,
        "outputs": {key: data["outputs"][key] for key in NODE_OUTPUTS},
    }


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")


def new_job_id(action: str = "train") -> str:
    return f"{action}-{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}-{secrets.token_hex(3)}"


def record_path(results_dir: str | Path, job_id: str) -> Path:
    return Path(results_dir) / "jobs" / f"{job_id}.json"


def job_dir(results_dir: str | Path, job_id: str) -> Path:
    return Path(results_dir) / "jobs" / job_id


def _index_dir() -> Path:
    return cache_dir() / "jobs"


def path_of(record: JobRecord) -> Path:
    """Where a record lives: beside its job folder, <id>.json (<results_dir>/jobs/<id>.json for every
    job submit wrote; an attached job folder that moved keeps its record beside it)."""
    return Path(record.outputs.job_dir).parent / f"{record.id}.json"


def save(record: JobRecord, *, index: bool = True) -> Path:
    """Write the record (atomically) beside its job folder and point the id index at it (a dry run's
    is not indexed: it writes nothing outside <results_dir>/jobs/; find it with --results-dir or by its path)."""
    path = path_of(record)
    atomic.write_json(path, record.model_dump(mode="json"))
    if index:
        index_record(record.id, path)
    return path


def index_record(job_id: str, path: Path) -> None:
    """Point the id index at a record, so `skillbank jobs status ID` finds it from any directory."""
    try:
        atomic.write_text(_index_dir() / job_id, str(path) + "\n")
    except OSError:
        pass  # the index is a convenience; the record itself is what counts


def load(path: str | Path) -> JobRecord:
    p = Path(path)
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InputError(f"cannot read job record: {exc}", where=str(p), fix="pass a job id or a jobs/<id>.json path") from None
    if isinstance(data, dict) and "job_id" in data and "id" not in data:  # version 1 of a foreground run's record
        data = from_foreground(data, p)
    try:
        return JobRecord.model_validate(data)
    except ValueError as exc:
        first = exc.errors()[0] if hasattr(exc, "errors") and exc.errors() else None
        detail = f"{'.'.join(str(x) for x in first['loc'])}: {first['msg']}" if first else str(exc)
        raise InputError(f"not a skillbank job record ({detail})", where=str(p), fix="pass a job id or a jobs/<id>.json path written by `skillbank submit`") from None


FOREGROUND_STATUS = {"dry_run": "rendered"}  # version 1's statuses that version 2 names otherwise
FOREGROUND_PROGRESS = {"last_step": "last_step", "total_steps": "total_steps", "last_loss": "last_loss", "val_loss_last": "last_val_loss",
                       "final_safetensors": "export"}


def from_foreground(data: dict[str, Any], path: Path) -> dict[str, Any]:
    """A version-1 foreground record (training/jobrecord before the shapes joined: job_id, started_at,
    ended_at, error, pid, outputs.{run_dir, val_loss_last, ...}) as a version-2 record dict."""
    outputs = dict(data.get("outputs") or {})
    results_dir = path.resolve().parent.parent
    run_dir = outputs.get("run_dir")
    progress = {new: outputs[old] for old, new in FOREGROUND_PROGRESS.items() if outputs.get(old) is not None}
    status = FOREGROUND_STATUS.get(data.get("status"), data.get("status") or "unknown")
    return {
        "schema_version": SCHEMA_VERSION, "id": data["job_id"], "kind": "foreground", "platform": "local",
        "backend": data.get("backend") or "local", "skill": data.get("skill") or "tao-finetune-cosmos-reason", "action": data.get("action") or "train",
        "spec": {"path": data.get("spec_path") or "", "sha256": data.get("spec_sha256") or "", "copy_path": None},
        "argv": list(data.get("argv") or []), "status": status, "submitted": data.get("started_at") or now(),
        "started": data.get("started_at"), "ended": data.get("ended_at"), "exit_code": data.get("exit_code"),
        "external_kind": "pid" if data.get("pid") else None, "external_id": str(data["pid"]) if data.get("pid") else None,
        "host": data.get("host"), "error": data.get("error") or data.get("reason"), "route": data.get("route"),
        "outputs": {"results_dir": str(results_dir), "job_dir": str(results_dir / "jobs" / data["job_id"]),
                    "train_output_dir": str(Path(run_dir).parent) if run_dir else "", "run_dir": run_dir,
                    "log": outputs.get("log") or outputs.get("launcher_log"), "cosmos_log_dir": outputs.get("log_dir")},
        "progress": {"state": status if status in ("running", "succeeded", "failed", "cancelled") else "unknown", "run_dir": run_dir, **progress} if run_dir else None,
        "notes": [f"read from a version-1 foreground record ({path.name}: schema_version {data.get('schema_version', 1)})"],
    }


def find(job: str, results_dir: str | None = None) -> tuple[JobRecord, Path]:
    """A job by record path, or by id (the index, then --results-dir, then ./results)."""
    candidates: list[Path] = []
    if job.endswith(".json") or os.sep in job:
        candidates.append(Path(job))
    else:
        pointer = _index_dir() / job
        if pointer.is_file():
            candidates.append(Path(pointer.read_text(encoding="utf-8").strip()))
        if results_dir:
            candidates.append(record_path(results_dir, job))
        candidates.append(record_path("results", job))
    for path in candidates:
        if path.is_file():
            return load(path), path.resolve()
    raise InputError(
        f"no job record found for {job!r}",
        where="JOB",
        fix="pass the id printed by `skillbank submit`, or the path of <results_dir>/jobs/<id>.json (or add --results-dir)",
    )


def list_records(results_dir: str | None = None) -> list[Path]:
    """Records known to the index (and under results_dir/jobs when given), newest first."""
    paths: set[Path] = set()
    if results_dir:
        paths.update(p.resolve() for p in (Path(results_dir) / "jobs").glob("*.json"))
    index = _index_dir()
    if index.is_dir():
        for pointer in index.iterdir():
            try:
                target = Path(pointer.read_text(encoding="utf-8").strip())
            except OSError:
                continue
            if target.is_file():
                paths.add(target.resolve())
    return sorted(paths, key=lambda p: p.stat().st_mtime, reverse=True)


def json_schema() -> dict[str, Any]:
    schema = JobRecord.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "skillbank job record"
    return schema
