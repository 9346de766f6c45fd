"""`skillbank jobs attach`: a Slurm job submitted by hand from a rendered job folder
(`skillbank submit --platform slurm --dry-run`, then `cd <job folder> && sbatch job.sbatch`) recorded,
so `jobs status|logs|cancel|wait` follow it like a job `skillbank submit` launched.

The record starts from the one beside the folder (`<id>.json`, which the dry run wrote), or, for a
folder that travelled alone, from the folder's own `job.json` and spec copy. The Slurm id is the one
given, else the newest `slurm-<N>.out` in the folder (sbatch's `--output`, written when the job
starts). Slurm is asked before anything is written: a job it knows under another name (the rendered
script names it `skillbank-<id>`) is refused, so a mistyped id never adopts someone else's job.
The record is written beside the folder, wherever the folder now lies, and indexed.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from skillbank.errors import InputError
from skillbank.runs import record as rec
from skillbank.platform import slurm_jobs
from skillbank.platform.base import have
from skillbank.platform.slurm import SCRIPT_NAME

OUTPUT = re.compile(r"^slurm-(\d+)\.out$")
HOW = "render it with `skillbank submit --platform slurm --dry-run`, then `cd <job folder> && sbatch job.sbatch`"


def attach(job_dir: str, slurm_id: str | None = None) -> tuple[rec.JobRecord, Path]:
    """Record Slurm job `slurm_id` (default: read from the folder's slurm-<N>.out) as the job of the
    folder `job_dir`; returns the record and its path."""
    folder = Path(job_dir).expanduser().resolve()
    if not (folder / SCRIPT_NAME).is_file():
        raise InputError(f"{folder} holds no {SCRIPT_NAME}: not a Slurm job folder skillbank rendered", where=job_dir, fix=HOW)
    facts = _facts(folder)
    job_id = str(facts["id"])
    base = _beside(folder, job_id)
    slurm_id, notes = _slurm_id(folder, slurm_id)
    if not have("scontrol"):
        raise InputError("scontrol is not on PATH: this is not a Slurm host", where="--slurm-id",
                         fix="run `skillbank jobs attach` on the cluster's login node, where the job was submitted")
    job = slurm_jobs.query(slurm_id)
    if job is not None and job.name and job.name != f"skillbank-{job_id}":
        raise InputError(f"Slurm job {slurm_id} is {job.name!r}, not this folder's job skillbank-{job_id}", where="--slurm-id",
                         fix="pass the id sbatch printed for this folder's job.sbatch")
    if base is not None and not base.dry_run and base.external_id not in (None, slurm_id) and base.status not in rec.FINAL:
        raise InputError(f"job {job_id} already follows Slurm job {base.external_id}, which has not ended (status {base.status})",
                         where="--slurm-id", fix=f"wait for it or cancel it (`skillbank jobs cancel {job_id}`) first")
    record = _attached(base or _from_facts(folder, facts), folder, slurm_id)
    if job is None:
        record = slurm_jobs.refresh(record)  # unknown to Slurm: says so in the record
    else:
        record = slurm_jobs.apply(record, job)
        record.submitted = job.submitted or record.submitted
    record.notes.extend(notes)
    return record, rec.save(record)


def _facts(folder: Path) -> dict:
    """The folder's job.json; without it (a folder rendered before it existed), the record beside it."""
    path = folder / rec.FOLDER_FACTS
    if path.is_file():
        try:
            facts = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise InputError(f"cannot read {path}: {exc}", where=str(path), fix=HOW) from None
        if facts.get("platform") != "slurm":
            raise InputError(f"{folder} holds a {facts.get('platform')} job; attach follows Slurm jobs submitted by hand", where=str(folder),
                             fix="run its command.sh, or submit the spec with --platform slurm")
        return facts
    for candidate in folder.parent.glob("*.json"):
        try:
            record = rec.load(candidate)
        except InputError:
            continue
        if Path(record.outputs.job_dir).name == folder.name and record.platform == "slurm":
            return {"id": record.id}
    raise InputError(f"{folder} holds no {rec.FOLDER_FACTS} and no job record lies beside it", where=str(folder), fix=HOW)


def _beside(folder: Path, job_id: str) -> rec.JobRecord | None:
    path = folder.parent / f"{job_id}.json"
    return rec.load(path) if path.is_file() else None


def _slurm_id(folder: Path, given: str | None) -> tuple[str, list[str]]:
    if given is not None:
        if not given.strip().isdigit():
            raise InputError(f"--slurm-id {given!r} is not a Slurm job id", where="--slurm-id", fix="pass the number sbatch printed, e.g. 4242")
        return given.strip(), []
    found = sorted((int(m.group(1)) for p in folder.iterdir() if (m := OUTPUT.match(p.name))), reverse=True)
    if not found:
        raise InputError(f"no slurm-<N>.out in {folder}: the job has not started yet (Slurm writes it when the job starts), or it ran elsewhere",
                         where=str(folder), fix="pass --slurm-id N (the number sbatch printed), or attach again once the job started")
    notes = [f"read Slurm job {found[0]} from slurm-{found[0]}.out; older outputs in the folder: "
             + ", ".join(f"slurm-{n}.out" for n in found[1:])] if len(found) > 1 else []
    return str(found[0]), notes


def _from_facts(folder: Path, facts: dict) -> rec.JobRecord:
    """A record for a folder that travelled without its record: job.json's facts, the spec copy, the folder."""
    from skillbank.specification.io import read_spec_file

    copy = folder / str(facts.get("spec_copy") or "spec.yaml")
    if not copy.is_file():
        raise InputError(f"the spec copy {copy.name} is missing from {folder}", where=str(copy), fix=HOW)
    results_dir = read_spec_file(copy).get("results_dir")
    outputs = facts.get("outputs") or {}
    return rec.JobRecord(
        **{key: facts[key] for key in rec.FACT_FIELDS if key in facts},
        spec=rec.SpecRef(path=str(copy), sha256=rec.sha256_file(copy), copy_path=str(copy)),
        argv=[], status="submitted", submitted=rec.now(),
        outputs=rec.Outputs(results_dir=str(results_dir or folder.parent.parent), job_dir=str(folder),
                            train_output_dir=str(outputs.get("train_output_dir") or ""),
                            **{key: outputs.get(key) for key in ("run_dir", "cosmos_log_dir", "study_dir")}),
        notes=[f"built from {folder / rec.FOLDER_FACTS} (no record beside the folder)"],
    )


def _attached(record: rec.JobRecord, folder: Path, slurm_id: str) -> rec.JobRecord:
    """The record as a job submitted by hand from `folder`, wherever that folder now lies."""
    record = record.model_copy(deep=True)
    copy = folder / Path(record.spec.copy_path).name
    if record.outputs.job_dir != str(folder):
        record.notes.append(f"the job folder moved: {record.outputs.job_dir} -> {folder}")
    record.outputs.job_dir, record.outputs.log, record.script = str(folder), str(folder / f"slurm-{slurm_id}.out"), str(folder / SCRIPT_NAME)
    record.spec.copy_path, record.spec.sha256 = str(copy), rec.sha256_file(copy) if copy.is_file() else record.spec.sha256
    record.argv = ["sbatch", SCRIPT_NAME]
    record.dry_run, record.status, record.submitted = False, "submitted", rec.now()
    record.started = record.ended = record.exit_code = None
    record.external_kind, record.external_id = "slurm-job", slurm_id
    record.notes = [n for n in record.notes if not n.startswith(slurm_jobs.REQUEUE_NOTE)]
    record.notes.append(f"attached {rec.now()}: Slurm job {slurm_id}, submitted by hand (`sbatch {SCRIPT_NAME}` in {folder})")
    return record
