"""Where each key of the train spec goes in cosmos-rl's config: the one table that the TOML writer
(training/cosmos_rl/toml.py), `spec --from` a cosmos-rl config (cosmos_config.py), the cosmos-rl
defaults snapshot (training/cosmos_rl/defaults.py) and the tests read.

cosmos-rl ignores a key it does not know, silently, so a spec key that is written under a wrong name
trains with cosmos-rl's default. Every leaf key of TrainSpec has one row here (tests/test_cosmos_keys.py
checks it, and that every cosmos-rl key named is a field of the installed cosmos-rl's Config):

- SAME: written to the same dotted key, value as the spec has it; read back as is.
- WRITTEN: the same key, but the writer sets the value (the row's note says how); read back as is.
- OTHER: another cosmos-rl key carries it (note); the writer translates, `spec --from` does not read it.
- CUSTOM: our dataset script's keys in cosmos-rl's free [custom] table (cosmos-rl has no default).
- SKILL: only the skill has it; never written.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from skillbank.specification.overrides import get_dotted, set_dotted

SAME, WRITTEN, OTHER, CUSTOM, SKILL = "same", "written", "other", "custom", "skill"


@dataclass(frozen=True)
class Route:
    how: str
    cosmos: str | None  # the cosmos-rl key; None for SKILL
    note: str = ""


def _same(*keys: str) -> dict[str, Route]:
    return {key: Route(SAME, key) for key in keys}


def _custom(*keys: str) -> dict[str, Route]:
    return {key: Route(CUSTOM, key) for key in keys}


TRAIN_KEYS: dict[str, Route] = {
    **_same("train.epoch", "train.train_batch_per_replica", "train.max_num_steps", "train.seed", "train.optm_name", "train.optm_lr",
            "train.optm_betas", "train.optm_weight_decay", "train.optm_decay_type", "train.optm_min_lr_factor", "train.optm_grad_norm_clip",
            "train.param_dtype", "train.fsdp_reshard_after_forward"),
    "train.output_dir": Route(WRITTEN, "train.output_dir", "the run folder <output_dir>/<run id>, with train.timestamp = the run id (no folder grows a timestamp)"),
    "train.optm_warmup_steps": Route(WRITTEN, "train.optm_warmup_steps", "a value < 1 as a float (cosmos-rl's fraction of all steps), else an int step count"),
    **_same("train.ckpt.enable_checkpoint", "train.ckpt.save_freq", "train.ckpt.save_freq_in_epoch", "train.ckpt.save_mode", "train.ckpt.max_keep",
            "train.ckpt.export_safetensors", "train.ckpt.upload_hf", "train.ckpt.hf_repo_name", "train.ckpt.upload_s3", "train.ckpt.s3_bucket"),
    "train.ckpt.s3_prefix": Route(WRITTEN, "train.ckpt.s3_prefix", "<s3_prefix>/<run id> when upload_s3 is on (the run's files in one folder, as the local backend puts them)"),
    "train.train_policy.type": Route(WRITTEN, "train.train_policy.type", "always \"sft\" (a missing type means GRPO)"),
    **_same("train.train_policy.mini_batch", "train.train_policy.dataloader_num_workers", "train.train_policy.dataloader_seed"),
    "train.train_policy.dataset.name": Route(WRITTEN, "train.train_policy.dataset.name", "left out when empty"),
    "train.train_policy.dataset.test_size": Route(WRITTEN, "train.train_policy.dataset.test_size", "a value >= 1 as an int record count (a float >= 1 would be a ratio)"),
    "validation.enable": Route(SAME, "validation.enable"),
    "validation.freq_in_epoch": Route(OTHER, "validation.freq", "validation.freq = freq_in_epoch x steps per epoch"),
    "validation.batch_size": Route(SAME, "validation.batch_size"),
    "policy.model_name_or_path": Route(WRITTEN, "policy.model_name_or_path", "what cosmos-rl loads: a hf_model:// reference downloaded before launch, as a local folder"),
    **_same("policy.model_max_length", "policy.model_gradient_checkpointing", "policy.parallelism.tp_size", "policy.parallelism.cp_size",
            "policy.parallelism.pp_size", "policy.parallelism.dp_shard_size", "policy.parallelism.dp_replicate_size"),
    "policy.enable_liger_fused_cross_entropy": Route(WRITTEN, "policy.enable_liger_fused_cross_entropy",
                                                     "also sets policy.enable_liger_kernel = true when on (cosmos-rl fuses the loss only with liger's kernels)"),
    "policy.lora.enable": Route(OTHER, "policy.lora", "the [policy.lora] table is written only when true (cosmos-rl has LoRA whenever the table exists)"),
    **_same("policy.lora.r", "policy.lora.lora_alpha", "policy.lora.lora_dropout", "policy.lora.target_modules", "policy.lora.use_rslora",
            "policy.lora.modules_to_save"),
    "logging.logger": Route(WRITTEN, "logging.logger", "\"console\" added when missing (progress and failures are read from its lines)"),
    **_same("logging.project_name", "logging.experiment_name"),
    **_custom("custom.train_dataset.annotation_path", "custom.train_dataset.media_path", "custom.val_dataset.annotation_path",
              "custom.val_dataset.media_path", "custom.vision.fps", "custom.vision.nframes", "custom.vision.total_pixels",
              "custom.vision.max_pixels", "custom.system_prompt"),
    "redis": Route(SAME, "redis"),
    "results_dir": Route(SKILL, None, "job records and reports of skillbank"),
    "paths.map": Route(SKILL, None, "the --path-map the spec was written with: commands on this machine apply it, jobs and TOMLs name REMOTE only"),
    "user_set": Route(SKILL, None, "the keys the user chose (spec --set): AutoML leaves them out of its search"),
    "fitted.records": Route(SKILL, None, "the records `skillbank spec` fitted the batches to (a job re-fits them where it runs)"),
    "fitted.counted": Route(SKILL, None, "where those records were counted"),
    "fitted.ceilings": Route(SKILL, None, "each fitted key's value before fitting: what a re-fit starts from"),
}

# How published cosmos-rl recipes spell our dataset script's keys (cosmos-reason2's examples): read by `spec --from`.
ALIASES = {
    "custom.dataset.annotation_path": "custom.train_dataset.annotation_path",
    "custom.dataset.media_path": "custom.train_dataset.media_path",
    "custom.dataset.system_prompt": "custom.system_prompt",
}

_READ = (SAME, WRITTEN, CUSTOM)


def spec_key(cosmos_key: str) -> str | None:
    """The train-spec key a cosmos-rl config key is read into by `spec --from` (None: not carried)."""
    if cosmos_key in ALIASES:
        return ALIASES[cosmos_key]
    return _FROM_COSMOS.get(cosmos_key)


_FROM_COSMOS = {route.cosmos: key for key, route in TRAIN_KEYS.items() if route.how in _READ and route.cosmos}


def cosmos_tree(spec: dict[str, Any], section: str) -> dict[str, Any]:
    """The SAME and WRITTEN keys of one top-level section of a dumped spec, at their cosmos-rl keys (the
    writer then sets the WRITTEN values); keys the dump lacks (an rl spec's) are left out."""
    out: dict[str, Any] = {}
    missing = object()
    for key, route in TRAIN_KEYS.items():
        if route.how in (SAME, WRITTEN) and key.split(".", 1)[0] == section:
            value = get_dotted(spec, key, missing)
            if value is not missing:
                set_dotted(out, route.cosmos, value)
    return out.get(section, {})


def keys_of(*hows: str) -> list[str]:
    return [key for key, route in TRAIN_KEYS.items() if route.how in hows]
