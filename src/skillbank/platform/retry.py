"""`skillbank submit --retry-of JOB`: the same run again, without the nodes its failure points at.

The retry takes the job's spec (the file it was submitted from when unchanged, else the job folder's copy), its
backend, nodes, GPUs, path map and Slurm options (#SBATCH --partition / --account / --time / --exclude of its
job.sbatch), continues its run folder (--resume-run: the newest complete checkpoint of that run, never another's)
and adds to --exclude the nodes `jobs diagnose` blames (platform.bad_nodes), which submit checks against sinfo so
that the partition keeps enough nodes. A flag given on the command line wins over the job's.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from skillbank.errors import InputError

SBATCH = re.compile(r"^#SBATCH --(partition|account|time|exclude)=(\S+)")


def blamed(record: Any) -> tuple[list[dict[str, Any]], str | None]:
    """The nodes the job's diagnosis names, and its state (a job that did not fail has nothing to blame)."""
    from skillbank.platform.diagnose_job import diagnose_any

    diag = diagnose_any(record.id, results_dir=record.outputs.results_dir)
    return list(diag.bad_nodes), diag.state


def _sbatch_options(script: str | None) -> dict[str, str]:
    try:
        text = Path(script).read_text(encoding="utf-8") if script else ""
    except OSError:
        return {}
    return {m.group(1): m.group(2) for line in text.splitlines() if (m := SBATCH.match(line))}


def retry_arguments(args: Any) -> list[str]:
    """Fill the submit flags from --retry-of's job (those not given); returns the notes. Without --retry-of: checks --spec."""
    if not getattr(args, "retry_of", None):
        return []  # --spec (or a DEFT job's --config) is checked by the command (commands.jobs.spec_or_config)
    from skillbank.hashing import sha256_file
    from skillbank.runs import record as rec

    prior, _ = rec.find(args.retry_of)
    if prior.action != "train" or prior.kind != "submit":
        raise InputError(f"--retry-of {prior.id}: a {prior.kind} {prior.action} job; a retry resubmits a submitted train job's run", where="--retry-of",
                         fix="submit the spec again (an AutoML study resumes itself: submit it with the same --study)")
    if not prior.outputs.run_dir:
        raise InputError(f"job {prior.id} has no run folder to continue", where="--retry-of", fix="submit its spec again")
    notes = [f"a retry of job {prior.id} ({prior.status}): its run {prior.outputs.run_dir} continues from its newest complete checkpoint"]
    if not args.spec:
        original = Path(prior.spec.path)
        same = original.is_file() and sha256_file(original) == prior.spec.sha256
        args.spec = str(original) if same else prior.spec.copy_path
        notes.append(f"spec: {args.spec}" + ("" if same else f" (the job folder's copy: {original} changed or is gone)"))
    args.backend = args.backend or prior.backend
    args.skill = prior.skill if args.skill == rec.JobRecord.model_fields["skill"].default or not args.skill else args.skill
    args.nodes = args.nodes or prior.nodes
    args.gpus_per_node = prior.gpus_per_node if args.gpus_per_node is None else args.gpus_per_node
    args.path_map = args.path_map or prior.path_map
    args.resume_run = args.resume_run or prior.outputs.run_dir
    if args.platform == "slurm" and prior.platform == "slurm":
        was = _sbatch_options(prior.script)
        for key in ("partition", "account", "time"):
            if getattr(args, key) is None and was.get(key):
                setattr(args, key, was[key])
        nodes, state = blamed(prior)
        excluded = [n for n in (args.exclude or was.get("exclude") or "").split(",") if n]
        for entry in nodes:
            if entry["node"] not in excluded:
                excluded.append(entry["node"])
                notes.append(f"excludes {entry['node']}: {entry['why']} ({entry['evidence'][:160]})")
        if not nodes:
            notes.append(f"its diagnosis ({state}) names no bad node: nothing more is excluded")
        args.exclude = ",".join(excluded) or None
    return notes
