"""Loading the model to evaluate: a local HF folder (a training run's safetensors/step_N included),
hf_model://owner/repo or a bare HF id (downloaded with huggingface_hub, HF_TOKEN read by the hub
client itself), optionally a LoRA adapter applied to its base model and merged for fast generation.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from skillbank.errors import InputError

HF_SCHEME = "hf_model://"
_HF_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
PROCESSOR_FILES = ("preprocessor_config.json", "video_preprocessor_config.json", "tokenizer_config.json", "tokenizer.json")


def resolve_model_path(name: str, *, key: str = "model.model_name") -> str:
    """A local folder for `name`: the folder itself, or a hub snapshot for hf_model://owner/repo / owner/repo."""
    if name.startswith(HF_SCHEME):
        return _download(name[len(HF_SCHEME) :], key)
    path = Path(name).expanduser()
    if path.is_dir():
        if not (path / "config.json").is_file() and not (path / "adapter_config.json").is_file():
            raise InputError(
                f"{path} is not a model folder (no config.json or adapter_config.json)",
                where=key,
                fix="point at a Hugging Face folder, e.g. <run>/safetensors/step_N",
            )
        return str(path)
    if _HF_ID.match(name) and not path.exists() and not name.startswith((".", "/")):
        return _download(name, key)
    raise InputError(f"model not found: {name}", where=key, fix="pass a local model folder, hf_model://owner/repo or owner/repo")


def _download(repo_id: str, key: str) -> str:
    from huggingface_hub import snapshot_download

    try:
        return snapshot_download(repo_id=repo_id)
    except Exception as exc:  # noqa: BLE001 - network, auth, or a missing repo: all are the input's problem
        raise InputError(
            f"no local folder {repo_id} and cannot download it from the Hugging Face hub: {type(exc).__name__}: {exc}",
            where=key,
            fix="check the path, or the repo id, your network and HF_TOKEN (gated models need an accepted licence)",
        ) from None


def has_processor(folder: str) -> bool:
    return any((Path(folder) / name).is_file() for name in PROCESSOR_FILES)


@dataclass
class LoadedModel:
    model: Any
    processor: Any
    device: Any
    path: str  # the folder the weights came from (the adapter's for LoRA)
    processor_path: str


def pick_device(num_gpus: int):
    import torch

    if num_gpus > 0 and torch.cuda.is_available():
        return torch.device("cuda:0")
    return torch.device("cpu")


def pick_dtype(dtype: str, device) -> Any:
    import torch

    if dtype == "auto":
        return torch.bfloat16 if device.type == "cuda" else torch.float32
    return getattr(torch, dtype)


def load_model(
    model_name: str,
    *,
    enable_lora: bool = False,
    base_model_path: str = "",
    dtype: str = "auto",
    num_gpus: int = 1,
) -> LoadedModel:
    """Model in eval mode on its device, and its processor (left padding, for batched generation)."""
    from transformers import AutoModelForImageTextToText, AutoProcessor

    path = resolve_model_path(model_name)
    device = pick_device(num_gpus)
    torch_dtype = pick_dtype(dtype, device)
    sharded = num_gpus > 1 and device.type == "cuda"
    kwargs: dict[str, Any] = {"dtype": torch_dtype}
    if sharded:
        kwargs["device_map"] = "auto"  # one model over the visible GPUs (accelerate)
    if enable_lora:
        from peft import PeftModel

        base = resolve_model_path(base_model_path, key="model.base_model_path")
        model = AutoModelForImageTextToText.from_pretrained(base, **kwargs)
        model = PeftModel.from_pretrained(model, path).merge_and_unload()
        processor_path = path if has_processor(path) else base
    else:
        model = AutoModelForImageTextToText.from_pretrained(path, **kwargs)
        processor_path = path
    if not sharded:
        model.to(device)
    model.eval()
    processor = AutoProcessor.from_pretrained(processor_path)
    processor.tokenizer.padding_side = "left"
    if processor.tokenizer.pad_token_id is None:
        processor.tokenizer.pad_token = processor.tokenizer.eos_token
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    return LoadedModel(model=model, processor=processor, device=device, path=path, processor_path=processor_path)
