"""A local-backend checkpoint step (per-rank FSDP2 shards) -> one full state dict -> a Hugging Face folder.

Each `model_rank_R.pth` holds the rank's DTensors (a LoRA run's: the trained parameters alone; the frozen base
comes from the base model folder); FSDP2 shards every parameter on dim 0 in rank order (Shard(0)), so the full tensor is the concatenation of the ranks' local tensors (checked
against the DTensor's global shape). Replicated tensors are taken from rank 0. The folder is written
by the local backend's own exporter, with the model and processor named in the step's cosmos_config.
cosmos-rl's own checkpoints use cosmos-rl's parameter names: export their safetensors/step_N instead.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from skillbank import modelref
from skillbank.errors import InputError
from skillbank.specification.train import LoraSpec


def _placements(value: Any) -> tuple:
    return tuple(getattr(value, "placements", ()) or ())


def gather(policy_dir: Path, world: int) -> dict[str, Any]:
    import torch

    parts = [torch.load(policy_dir / f"model_rank_{r}.pth", map_location="cpu", weights_only=False) for r in range(world)]
    full: dict[str, Any] = {}
    for key, first in parts[0].items():
        if not hasattr(first, "_local_tensor"):
            full[key] = first
            continue
        placements = _placements(first)
        locals_ = [p[key]._local_tensor for p in parts]
        if all(type(pl).__name__ == "Replicate" for pl in placements):
            tensor = locals_[0]
        elif len(placements) == 1 and type(placements[0]).__name__ == "Shard" and placements[0].dim == 0:
            tensor = torch.cat([t for t in locals_ if t.numel() or t.dim() > 1], dim=0)
        else:
            raise InputError(f"cannot gather {key}: placements {placements} (only FSDP2's Shard(0) and Replicate)", where=str(policy_dir))
        if tuple(tensor.shape) != tuple(first.shape):
            raise InputError(f"gathered {key} has shape {tuple(tensor.shape)}, expected {tuple(first.shape)}", where=str(policy_dir))
        full[key] = tensor.contiguous()
    return full


def checkpoint_to_hf(policy_dir: Path, work_dir: Path, step: int, *, base_model: str = "") -> Path:
    """Write <work_dir>/safetensors/step_N from the rank shards of a complete local-backend checkpoint."""
    from transformers import AutoProcessor

    from skillbank.runs import layout
    from skillbank.training.local.checkpoint import export_safetensors

    try:
        config = json.loads((policy_dir / layout.CONFIG_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InputError(f"cannot read the checkpoint's cosmos_config: {exc}", where=str(policy_dir)) from None
    local = config.get("skillbank_local")
    if not isinstance(local, dict):
        raise InputError(
            "this checkpoint was not written by the local backend (no skillbank_local in cosmos_config)",
            where=str(policy_dir),
            fix="for cosmos-rl runs export <run>/safetensors/step_N (train.ckpt.export_safetensors=true writes it with each checkpoint)",
        )
    policy = config.get("policy") or {}
    model = base_model or str(policy.get("model_name_or_path", ""))
    base = modelref.parse(model)
    if base.kind != "local" or not base.path.is_dir():
        raise InputError(
            f"the checkpoint's base model {model!r} is not a local folder (its config and processor are needed)",
            where="base_model_path",
            fix="pass base_model_path (--base-model) = the model folder the run started from",
        )
    lora = LoraSpec.model_validate(policy.get("lora") or {})
    world = layout.saving_ranks(policy_dir) or 1
    state = gather(policy_dir, world)
    if local.get("trainable_only"):  # a LoRA checkpoint without its frozen base: the base model's weights, under peft's names
        from skillbank.training.local.model import load_policy

        full = dict(load_policy(str(base.path), lora=lora)[0].state_dict())
        missing = sorted(set(state) - set(full))
        if missing:
            raise InputError(f"the checkpoint's trained parameters are not the base model's with its policy.lora ({missing[:3]})", where=str(policy_dir),
                             fix="pass base_model_path (--base-model) = the model folder the run started from")
        state = {**full, **state}
    scale = lora.scale
    return export_safetensors(work_dir, step, state, model_path=str(base.path), processor=AutoProcessor.from_pretrained(str(base.path)), lora_scale=scale)
