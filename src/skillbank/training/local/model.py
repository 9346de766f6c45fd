"""Load the policy, add LoRA and gradient checkpointing, and shard it with FSDP2.

FSDP2 (`fully_shard`) rather than FSDP1: FSDP1 refuses CPU without a device_id, and with
device_id=cpu segfaults when gathering a full state dict (docs: cpu-stack). Every transformer block
(the model's `_no_split_modules`: vision blocks and language decoder layers) becomes one FSDP unit,
then the root; with dp_replicate_size > 1 the mesh is 2-D (replicate, shard): HSDP.
"""

from __future__ import annotations

from typing import Any


def compute_dtype(param_dtype: str, device_type: str):
    """The forward/backward dtype: the spec's on GPU, float32 on CPU (bf16 matmuls are slow there)."""
    import torch

    if device_type != "cuda":
        return torch.float32
    return {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}[param_dtype]


def load_policy(model_path: str, *, lora: Any = None, gradient_checkpointing: bool = False):
    """(model in float32 on CPU, processor). lora: the spec's policy.lora section (used when enabled)."""
    import torch
    from transformers import AutoModelForImageTextToText, AutoProcessor

    from skillbank.compat import patch_embed_linear, qwen25_temporal

    qwen25_temporal.install()  # frame order at fps > 2 on Qwen2.5-VL, as cosmos-rl keeps it
    patch_embed_linear.install()  # the vision patch embedding as one matmul, not a CPU 3-D convolution
    processor = AutoProcessor.from_pretrained(model_path)
    model = AutoModelForImageTextToText.from_pretrained(model_path, dtype=torch.float32)
    model.config.use_cache = False
    if gradient_checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    if lora is not None and lora.enable:
        from peft import LoraConfig, get_peft_model

        config = LoraConfig(
            r=lora.r,
            lora_alpha=lora.lora_alpha,
            lora_dropout=lora.lora_dropout,
            target_modules=list(lora.target_modules),
            use_rslora=lora.use_rslora,
            modules_to_save=lora.modules_to_save,
            bias="none",
        )
        model = get_peft_model(model, config)
    return model, processor


def base_model(model):
    """The transformers model under a peft wrapper (or the model itself)."""
    return model.get_base_model() if hasattr(model, "peft_config") else model


def shard_units(model) -> list:
    names = set(getattr(base_model(model), "_no_split_modules", None) or [])
    return [m for m in model.modules() if type(m).__name__ in names]


def make_mesh(device_type: str, replicate: int, shard: int):
    from torch.distributed.device_mesh import init_device_mesh

    if replicate > 1:
        return init_device_mesh(device_type, (replicate, shard), mesh_dim_names=("dp_replicate", "dp_shard"))
    return init_device_mesh(device_type, (shard,), mesh_dim_names=("dp_shard",))


def shard_model(model, mesh, *, dtype, reshard_after_forward: bool = True) -> None:
    """fully_shard each block, then the root, in place. reshard_after_forward False (the spec's
    train.fsdp_reshard_after_forward "never") keeps each block's gathered weights for the backward."""
    import torch
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    mp = MixedPrecisionPolicy(param_dtype=dtype, reduce_dtype=torch.float32) if dtype != torch.float32 else MixedPrecisionPolicy()
    for unit in shard_units(model):
        fully_shard(unit, mesh=mesh, mp_policy=mp, reshard_after_forward=reshard_after_forward)
    fully_shard(model, mesh=mesh, mp_policy=mp, reshard_after_forward=reshard_after_forward)
