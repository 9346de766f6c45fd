"""Spec checks: the spec models' own rules (reused, never restated) and the rules that need the
machine or the data: parallel sizes vs GPUs, training steps per rank, validation data, data paths."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from skillbank.data.media import media_root
from skillbank.data.split import check_val_dataset, uses_train_split
from skillbank.errors import InputError
from skillbank.preflight.report import Findings
from skillbank.specification.io import read_spec_file
from skillbank.specification.registry import spec_model
from skillbank.specification.validation import problems
from skillbank.runs import steps

DATASET_FIX = "pass --dataset-root DIR to `skillbank spec`, or --set {key}=FILE"


def load(skill: str, action: str, spec_path: str | Path | None, spec: dict[str, Any] | None, findings: Findings) -> BaseModel | None:
    """The validated spec; when it has problems, they are reported and the other checks get a
    best-effort spec: offending keys dropped back to their defaults (which also uncovers rules
    that pydantic skips while a field of the same section is invalid). None when nothing is left."""
    try:
        model = spec_model(skill, action)
        if spec is None:
            if spec_path is None:
                raise InputError("no spec given", where="--spec", fix="pass --spec FILE (write one with `skillbank spec ... -o FILE`)")
            spec = read_spec_file(spec_path)
    except InputError as exc:
        findings.error("spec.schema", exc.message, exc.fix, exc.where)
        return None
    data, reported = copy.deepcopy(spec), set()
    for _ in range(5):
        try:
            return model.model_validate(data)
        except ValidationError as exc:
            found = [p for p in problems(model, exc) if (p.key, p.message) not in reported]
        if not found:
            return None
        for p in found:
            reported.add((p.key, p.message))
            findings.error("spec.schema", f"{p.key}: {p.message}", p.fix, p.key)
            _drop(data, p.key.split("."))
    return None


def _drop(data: Any, parts: list[str]) -> None:
    for part in parts[:-1]:
        if not isinstance(data, dict) or not isinstance(data.get(part), dict):
            return
        data = data[part]
    if isinstance(data, dict):
        data.pop(parts[-1], None)


# ---- train -----------------------------------------------------------------------------------------


def parallelism(spec: Any, gpus_per_node: int | None, nodes: int | None, findings: Findings) -> None:
    p = spec.policy.parallelism
    others = p.tp_size * p.cp_size * p.pp_size
    per_node = p.dp_shard_size * others
    if gpus_per_node is not None and per_node != gpus_per_node:
        fix = (
            f"set policy.parallelism.dp_shard_size={gpus_per_node // others}"
            if gpus_per_node % others == 0
            else f"choose sizes whose product is {gpus_per_node}"
        )
        findings.error(
            "spec.parallelism",
            f"dp_shard_size {p.dp_shard_size} * tp_size {p.tp_size} * cp_size {p.cp_size} * pp_size {p.pp_size} = {per_node} GPUs per replica, "
            f"but --gpus-per-node is {gpus_per_node}",
            fix,
            "policy.parallelism.dp_shard_size",
        )
    if nodes is not None and p.dp_replicate_size != nodes:
        findings.error(
            "spec.parallelism",
            f"dp_replicate_size {p.dp_replicate_size} (one replica per node) but --nodes is {nodes}",
            f"set policy.parallelism.dp_replicate_size={nodes}",
            "policy.parallelism.dp_replicate_size",
        )


def steps_per_rank(spec: Any, train_records: int, val_records: int | None, findings: Findings, *, backend: str | None = None) -> None:
    """Optimizer steps as cosmos-rl counts them (skillbank.runs.steps): zero is an error, fewer
    than FEW_STEPS_PER_EPOCH per epoch a warning, each with batches that give useful steps; validation
    on with zero batches per rank an error (the local backend validates every record)."""
    count = steps.train_count(spec, train_records)
    problem = steps.steps_problem(spec, count)
    if problem is not None:
        findings.add("spec.steps_per_rank", problem.severity, problem.message, problem.fix, problem.where)
    if backend == "local":
        return
    problem = steps.validation_problem(spec, count, val_records)
    if problem is not None:
        findings.add("spec.steps_per_rank", problem.severity, problem.message, problem.fix, problem.where)


def validation_data(spec: Any, findings: Findings) -> None:
    try:
        check_val_dataset(spec)
    except InputError as exc:
        findings.error("spec.validation_data", exc.message, exc.fix, exc.where)
        return
    if uses_train_split(spec) and spec.train.train_policy.dataset.test_size == 0:
        findings.error(
            "spec.validation_data",
            "validation.enable is true with no custom.val_dataset and test_size 0: cosmos-rl still moves 1 train record to validation",
            "give custom.val_dataset, set train.train_policy.dataset.test_size (e.g. 0.1), or set validation.enable=false",
            "train.train_policy.dataset.test_size",
        )


def checkpoints(spec: Any, findings: Findings) -> None:
    """A save_freq that does nothing (save_freq_in_epoch wins, in cosmos-rl and the local backend alike): a warning."""
    ignored = spec.train.ckpt.ignored_save_freq()
    if ignored:
        findings.warning("spec.checkpoints", ignored, "set train.ckpt.save_freq_in_epoch=0 to save every save_freq steps, or save_freq=null to save by epoch",
                         "train.ckpt.save_freq")


def dataset_file(key: str, value: str, findings: Findings, *, required: bool = True) -> str | None:
    """The annotation file of a spec key, when it is set and exists (else a spec.dataset_paths finding)."""
    if not value:
        if required:
            findings.error("spec.dataset_paths", f"{key} is empty: no annotations to train or evaluate on", DATASET_FIX.format(key=key), key)
        return None
    path = Path(value).expanduser()
    if not path.is_file():
        what = "is a folder, not a file" if path.is_dir() else "does not exist"
        findings.error("spec.dataset_paths", f"{key} {value!r} {what}", "point it at the LLaVA annotations .json file", key)
        return None
    return str(path)


def media_folder(key: str, value: str, annotation_path: str, findings: Findings) -> str:
    """The folder the records' video paths are checked against (skillbank.data.media's rule)."""
    folder = media_root(value, annotation_path)
    if not value:
        findings.warning(
            "spec.dataset_paths",
            f"{key} is empty: media paths in the records are resolved from the annotation file's folder {folder}",
            f"set {key} to the folder the records' video paths are relative to",
            key,
        )
    return str(Path(folder).expanduser())
