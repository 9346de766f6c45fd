"""TrainSpec -> cosmos-rl's TOML.

cosmos-rl ignores unknown keys and has defaults that surprise (tp_size 2, enable_checkpoint false,
a missing train_policy table meaning GRPO, compile true, an output_dir that grows a timestamp), so
every such value is written explicitly. Which spec key goes to which cosmos-rl key is one table,
skillbank.specification.cosmos_keys: its SAME and WRITTEN rows are copied to their keys, then the
WRITTEN values are set here, OTHER keys translated (validation.freq_in_epoch -> validation.freq in
steps; policy.lora.enable -> the table's presence), SKILL keys dropped (results_dir); `custom`
carries what the dataset script needs.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tomli_w

from skillbank import atomic
from skillbank.data.media import media_root
from skillbank.data.video import PIXEL_BUDGET_SHARE, default_total_pixels
from skillbank.specification import cosmos_keys
from skillbank.specification.io import drop_none as _drop_none
from skillbank.specification.train import TrainSpec
from skillbank.training import upload
from skillbank.runs import steps
from skillbank.training.cosmos_rl.family import ModelFamily


@dataclass
class CosmosToml:
    """The TOML as a dict, plus the numbers and notes the plan shows."""

    data: dict[str, Any]
    train_records: int
    steps_per_epoch: int
    gpus_per_replica: int
    notes: list[str] = field(default_factory=list)
    plan: dict[str, Any] = field(default_factory=dict)  # skillbank.runs.steps.run_plan


def build_toml(spec: TrainSpec, *, model: str, family: ModelFamily, run_dir: Path, run_id: str, resume: bool | str,
               counts: steps.TrainCount | None = None) -> CosmosToml:
    """The cosmos-rl config for one run. `model` is what cosmos-rl loads (a local path, or an id);
    `counts` is train_steps(spec) when the caller has it already (it reads the annotations).
    resume: cosmos-rl's train.resume: true scans the sibling run folders for the newest checkpoint, a
    path (a step_N/policy folder) starts from that checkpoint."""
    notes: list[str] = []
    train = _train(spec, run_dir=run_dir, run_id=run_id, resume=resume)
    policy = _policy(spec, model)
    count = counts or train_steps(spec)
    plan = steps.step_plan(spec, count.train)
    validation = _validation(spec, plan, notes)
    data: dict[str, Any] = {
        "redis": cosmos_keys.cosmos_tree(spec.model_dump(mode="json"), "redis"),
        "train": train,
        "policy": policy,
        "validation": validation,
        "logging": _logging(spec, notes),
        "custom": _custom(spec, family, notes),
    }
    par = spec.policy.parallelism
    gpus = par.tp_size * par.cp_size * par.pp_size * par.dp_shard_size * par.dp_replicate_size
    return CosmosToml(_drop_none(data), count.train, plan.steps_per_epoch, gpus, notes, steps.run_plan(spec, count))


def write_toml(path: str | Path, data: dict[str, Any]) -> Path:
    return atomic.write_text(path, atomic.with_newline(tomli_w.dumps(_drop_none(data))))


# --- sections -----------------------------------------------------------------------------------


def _train(spec: TrainSpec, *, run_dir: Path, run_id: str, resume: bool | str) -> dict[str, Any]:
    train = cosmos_keys.cosmos_tree(spec.model_dump(mode="json"), "train")
    # cosmos-rl appends a timestamp to output_dir unless train.timestamp is set: fix both, so the
    # run folder is known before launch. resume scans the sibling run folders of this one.
    train["output_dir"] = str(run_dir)
    train["timestamp"] = run_id
    train["resume"] = resume
    train["compile"] = False  # cosmos-rl defaults to torch.compile; the published Reason recipes turn it off
    train["optm_warmup_steps"] = _warmup(spec.train.optm_warmup_steps)
    policy = train["train_policy"]
    policy["type"] = "sft"  # a missing type means GRPO
    policy["dataloader_drop_last"] = steps.DATALOADER_DROP_LAST  # skillbank.runs.steps counts with it
    test_size = policy["dataset"].get("test_size")
    if test_size is not None and test_size >= 1:
        policy["dataset"]["test_size"] = int(test_size)  # a record count; a float >= 1 would be a ratio
    if not policy["dataset"].get("name"):
        policy["dataset"].pop("name", None)
    if all(v is None for v in policy["dataset"].values()):
        del policy["dataset"]
    ckpt = train["ckpt"]
    if ckpt["upload_s3"]:  # a run's files under <s3_prefix>/<timestamp>/, as the local backend puts them
        ckpt["s3_prefix"] = upload.s3_run_prefix(ckpt["s3_prefix"], run_id)
    return train


def _warmup(value: float) -> float | int:
    """Ours: a fraction of the steps when < 1, else a step count. cosmos-rl: a float <= 1.0 is a fraction."""
    return float(value) if 0 < value < 1 else int(value)


def _policy(spec: TrainSpec, model: str) -> dict[str, Any]:
    policy = cosmos_keys.cosmos_tree(spec.model_dump(mode="json"), "policy")
    policy["model_name_or_path"] = model
    policy["parallelism"]["n_init_replicas"] = 1
    if not spec.policy.lora.enable:
        del policy["lora"]  # cosmos-rl trains LoRA whenever the table exists
    if policy.get("enable_liger_fused_cross_entropy"):
        policy["enable_liger_kernel"] = True  # cosmos-rl uses the fused loss only with liger's kernels on (policy/kernel/loss.py)
    return policy


def train_steps(spec: TrainSpec) -> steps.TrainCount:
    """The spec's train records (annotated, and after any validation split); the steps follow from
    skillbank.runs.steps.step_plan."""
    return steps.read_train_count(spec)


def _validation(spec: TrainSpec, plan: steps.StepPlan, notes: list[str]) -> dict[str, Any]:
    val = spec.validation
    per_epoch = plan.steps_per_epoch
    freq = max(1, val.freq_in_epoch * per_epoch)
    if per_epoch == 0:
        notes.append(
            f"{plan.records} train records over {plan.ranks} data-parallel rank(s) give {plan.records_per_rank} per rank, no full batch of "
            f"{plan.batch_per_rank}: cosmos-rl would run zero steps (run `skillbank preflight`)"
        )
    elif val.enable:
        notes.append(f"validation.freq_in_epoch {val.freq_in_epoch} -> validation.freq {freq} steps ({per_epoch} steps per epoch)")
    return {**cosmos_keys.cosmos_tree(spec.model_dump(mode="json"), "validation"), "freq": freq}


def _logging(spec: TrainSpec, notes: list[str]) -> dict[str, Any]:
    logging = cosmos_keys.cosmos_tree(spec.model_dump(mode="json"), "logging")  # an rl spec's logging has the same keys
    if "console" not in logging["logger"]:
        logging["logger"] = ["console", *logging["logger"]]
        notes.append('logging.logger: added "console" (progress and failures are read from its lines)')
    if "wandb" in logging["logger"] and not os.environ.get("WANDB_API_KEY"):
        notes.append("logging.logger has wandb but WANDB_API_KEY is not set")
    return logging


def vision_table(vision_spec: Any, model_max_length: int, family: ModelFamily, notes: list[str]) -> dict[str, Any]:
    """custom.vision as the dataset scripts read it, a null total_pixels resolved for the family
    (SFT and GRPO alike)."""
    vision = vision_spec.model_dump(mode="json")
    if vision["total_pixels"] is None:
        vision["total_pixels"] = default_total_pixels(model_max_length, family.pixels_per_token)
        notes.append(
            f"custom.vision.total_pixels {vision['total_pixels']} = model_max_length {model_max_length}"
            f" x {family.pixels_per_token} pixels per token ({family.model_type}) x {PIXEL_BUDGET_SHARE}"
        )
    return vision


def _custom(spec: TrainSpec, family: ModelFamily, notes: list[str]) -> dict[str, Any]:
    custom = spec.custom
    vision = vision_table(custom.vision, spec.policy.model_max_length, family, notes)
    out: dict[str, Any] = {
        "model_family": family.model_type,
        "system_prompt": custom.system_prompt,
        "vision": vision,
        "train_dataset": _dataset_paths(custom.train_dataset),
    }
    if custom.val_dataset is not None and custom.val_dataset.annotation_path:  # the script reads every set it is given
        out["val_dataset"] = _dataset_paths(custom.val_dataset)
    return out


def _dataset_paths(paths: Any) -> dict[str, str]:
    # The media folder is always named (absolute), so the dataset script never resolves an empty one.
    return {"annotation_path": _abs(paths.annotation_path), "media_path": _abs(media_root(paths.media_path, paths.annotation_path))}


def _abs(path: str) -> str:
    return str(Path(path).expanduser().resolve()) if path else ""
