"""Per-rank checkpoints in cosmos-rl's layout, and Hugging Face safetensors exports.

Each rank writes {model,optimizer,scheduler,extra_info}_rank_R.pth (its FSDP2 shards as DTensors,
like cosmos-rl; a LoRA run's model file holds the trained parameters alone, not the frozen base cosmos-rl keeps
too: runs.disk) through temp-file renames, then its `.rank_R_complete` marker; rank 0 also writes
cosmos_config (the spec, plus how many ranks must mark the checkpoint). The export gathers the full
state dict and writes a temporary folder renamed to safetensors/step_N: the whole model + processor,
or for a LoRA run the adapter as cosmos-rl 0.4.7 exports it (LLMTrainer.export_safetensors with
policy.lora): adapter_model.safetensors holding the trained weights alone under peft's names
(base_model.model.<module>.lora_A.weight ...), adapter_config.json (cosmos-rl's LoraConfig dumped, plus
base_model_name_or_path and peft_type), the processor, generation_config.json, and the base model's
other .json / .py files it lacks. So a CPU rehearsal writes what a GPU run writes; evaluate and
inference load either folder, and `skillbank export` merges an adapter into a whole model.
"""

from __future__ import annotations

import os
import random
import shutil
from pathlib import Path
from typing import Any

from skillbank import atomic
from skillbank.runs import layout


def rng_state() -> dict[str, Any]:
    import numpy as np
    import torch

    state = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    import numpy as np
    import torch

    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def _save(obj: Any, path: Path) -> None:
    import torch

    with atomic.atomic_path(path) as tmp:
        torch.save(obj, tmp)


def save_checkpoint(
    run_dir: str | os.PathLike[str],
    step: int,
    *,
    model,
    optimizer,
    scheduler,
    extra: dict[str, Any],
    rank: int,
    world: int,
    config: dict[str, Any],
    trainable_only: bool = False,
) -> Path:
    """Write this rank's part of step_N; the checkpoint is complete once every rank has marked it.
    `trainable_only` (a LoRA run: runs.disk.trainable_only): the model state holds the trained parameters alone,
    the frozen base is read from the model folder again on resume (load_checkpoint)."""
    policy = layout.checkpoint_dir(run_dir, step)
    policy.mkdir(parents=True, exist_ok=True)
    _save(model_state(model, trainable_only), policy / f"model_rank_{rank}.pth")
    _save(optimizer.state_dict(), policy / f"optimizer_rank_{rank}.pth")
    _save(scheduler.state_dict(), policy / f"scheduler_rank_{rank}.pth")
    _save({**extra, "rng_state": rng_state(), "step": step, "trainable_only": trainable_only}, policy / f"extra_info_rank_{rank}.pth")
    if rank == 0:
        doc = {**config, "skillbank_local": {"saving_ranks": world, "step": step, "trainable_only": trainable_only}}
        atomic.write_json(policy / layout.CONFIG_FILE, doc)
    atomic.write_text(policy / f".rank_{rank}_complete", "")
    return policy


def model_state(model, trainable_only: bool) -> dict[str, Any]:
    """The model's state dict, or its trained parameters alone (the adapters, and modules_to_save)."""
    state = model.state_dict()
    if not trainable_only:
        return state
    trained = {name for name, p in model.named_parameters() if p.requires_grad}
    return {k: v for k, v in state.items() if k in trained}


def load_checkpoint(policy_dir: str | os.PathLike[str], *, model, optimizer, scheduler, rank: int) -> dict[str, Any]:
    """Restore this rank's model, optimizer, scheduler and RNG; returns extra_info (step, ...). A trainable-only
    checkpoint loads into the model built from the model folder (its frozen base): every key it lacks must be frozen."""
    import torch

    policy = Path(policy_dir)
    extra = torch.load(policy / f"extra_info_rank_{rank}.pth", map_location="cpu", weights_only=False)
    state = torch.load(policy / f"model_rank_{rank}.pth", map_location="cpu", weights_only=False)
    if extra.get("trainable_only"):
        trained = {name for name, p in model.named_parameters() if p.requires_grad}
        missing, unexpected = model.load_state_dict(state, strict=False)
        lost = sorted(set(missing) & trained)
        if lost or unexpected:
            raise ValueError(f"{policy}: a trainable-only checkpoint that does not fit this model: trained parameters missing "
                             f"{lost[:3]}, unexpected {sorted(unexpected)[:3]} (another policy.lora?)")
    else:
        model.load_state_dict(state)
    optimizer.load_state_dict(torch.load(policy / f"optimizer_rank_{rank}.pth", map_location="cpu", weights_only=False))
    scheduler.load_state_dict(torch.load(policy / f"scheduler_rank_{rank}.pth", map_location="cpu", weights_only=False))
    if "rng_state" in extra:
        set_rng_state(extra["rng_state"])
    return extra


def gather_full_state(model) -> dict[str, Any]:
    """The full, unsharded state dict on rank 0 (CPU); an empty dict elsewhere. Collective."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    return get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))


PEFT_PREFIX = "base_model.model."
ADAPTER_WEIGHTS = "adapter_model.safetensors"
# cosmos-rl 0.4.7's LoraConfig fields that the spec does not carry, at its defaults (tests compare the
# whole adapter_config.json with cosmos-rl's own dump of the same spec)
COSMOS_LORA_DEFAULTS = {"lora_names": ["default"], "lora_path": None, "primary_adapter": None, "alpha_pattern": None,
                        "r_pattern": None, "init_lora_weights": True}
COSMOS_LORA_ORDER = ("r", "lora_names", "lora_path", "lora_alpha", "lora_dropout", "target_modules", "primary_adapter", "use_rslora",
                     "modules_to_save", "alpha_pattern", "r_pattern", "init_lora_weights")


def adapter_config(lora: dict[str, Any], *, base_model: str) -> dict[str, Any]:
    """adapter_config.json as cosmos-rl writes it for the spec's policy.lora section (a dict)."""
    fields = {**COSMOS_LORA_DEFAULTS, **{k: v for k, v in lora.items() if k != "enable"}}
    return {**{k: fields[k] for k in COSMOS_LORA_ORDER}, "base_model_name_or_path": base_model, "peft_type": "LORA"}


def adapter_weights(state: dict[str, Any]) -> dict[str, Any]:
    """The trained weights of a peft state dict, named as peft's adapter files (and cosmos-rl's export)
    name them: <module>.lora_A.weight / lora_B.weight, and each module trained in full (modules_to_save)
    under its own name; the frozen base weights are left out."""
    out: dict[str, Any] = {}
    for key, value in state.items():
        if ".lora_A.default." in key or ".lora_B.default." in key:
            out[key.replace(".default.", ".")] = value
        elif ".modules_to_save.default." in key:
            out[key.replace(".modules_to_save.default.", ".")] = value
    return out


def _write_adapter(folder: Path, state: dict[str, Any], config: dict[str, Any], dtype) -> None:
    import json

    from safetensors.torch import save_file

    weights = adapter_weights(state)
    if not weights:
        raise ValueError("a LoRA export found no lora_A / lora_B weights in the model's state")
    folder.mkdir(parents=True, exist_ok=True)
    cast = {k: (v.to(dtype) if dtype is not None and v.is_floating_point() else v).contiguous() for k, v in weights.items()}
    save_file(cast, str(folder / ADAPTER_WEIGHTS), metadata={"format": "pt"})
    (folder / "adapter_config.json").write_text(json.dumps(config, indent=4), encoding="utf-8")


def _copy_missing(source: Path, folder: Path) -> None:
    """The base model's .py and .json files the export lacks (config.json, the preprocessor's), as cosmos-rl copies them."""
    for path in sorted([*source.glob("*.py"), *source.glob("*.json")]):
        if not (folder / path.name).exists():
            shutil.copy2(path, folder / path.name)


def merge_lora(state: dict[str, Any], scaling: float | None) -> dict[str, Any]:
    """A peft state dict -> the base model's, with W + scaling * B @ A folded into each Linear."""
    if scaling is None and not any(k.startswith(PEFT_PREFIX) for k in state):
        return state
    merged: dict[str, Any] = {}
    for key, value in state.items():
        if ".lora_" in key or ".original_module." in key:
            continue
        name = key
        if ".base_layer." in key:
            prefix, leaf = key.split(".base_layer.", 1)
            a, b = state.get(f"{prefix}.lora_A.default.weight"), state.get(f"{prefix}.lora_B.default.weight")
            if leaf == "weight" and a is not None and b is not None and scaling is not None:
                value = (value.float() + scaling * (b.float() @ a.float())).to(value.dtype)
            name = f"{prefix}.{leaf}"
        name = name.replace(".modules_to_save.default.", ".")
        merged[name.removeprefix(PEFT_PREFIX)] = value
    return merged


def _write_model(folder: Path, state: dict[str, Any], *, model_path, dtype, lora_scale: float | None) -> None:
    import torch
    from transformers import AutoConfig, AutoModelForImageTextToText

    config = AutoConfig.from_pretrained(model_path)
    weights = merge_lora(state, lora_scale)
    if dtype is not None:
        weights = {k: v.to(dtype) if v.is_floating_point() else v for k, v in weights.items()}
    if getattr(config, "tie_word_embeddings", False) or getattr(getattr(config, "text_config", None), "tie_word_embeddings", False):
        weights.pop("lm_head.weight", None)
    with torch.device("meta"):
        skeleton = AutoModelForImageTextToText.from_config(config)
    skeleton.save_pretrained(folder, state_dict=weights, safe_serialization=True)


def export_safetensors(
    run_dir: str | os.PathLike[str],
    step: int,
    state: dict[str, Any],
    *,
    model_path: str | os.PathLike[str],
    processor,
    dtype=None,
    lora_scale: float | None = None,
    custom: dict[str, Any] | None = None,
    base_model: str = "",
    adapter: dict[str, Any] | None = None,
) -> Path:
    """Write safetensors/step_N (rank 0): a folder AutoModelForImageTextToText + AutoProcessor load, or
    with `adapter` (adapter_config.json's content, see adapter_config) the LoRA adapter cosmos-rl would
    export; lora_scale instead merges the adapters into a whole model (checkpoint shards -> HF). Both carry
    skillbank_recipe.json (skillbank.recipe) from the spec's `custom` table when given."""
    target = layout.safetensors_dir(run_dir, step)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.parent / f".step_{step}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        if adapter is not None:
            _write_adapter(tmp, state, adapter, dtype)
        else:
            _write_model(tmp, state, model_path=model_path, dtype=dtype, lora_scale=lora_scale)
        processor.save_pretrained(tmp)
        generation = Path(model_path) / "generation_config.json"
        if generation.is_file():
            shutil.copy2(generation, tmp / "generation_config.json")
        if adapter is not None:
            _copy_missing(Path(model_path), tmp)
        if custom is not None:
            from skillbank import recipe

            recipe.write(tmp, recipe.from_custom(custom, base_model=base_model or str(model_path), steps=step, model_dir=tmp))
        if target.exists():
            shutil.rmtree(target)
        os.rename(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return target
