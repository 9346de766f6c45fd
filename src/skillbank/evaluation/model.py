"""Loading the model to evaluate: a local HF folder (a training run's safetensors/step_N included),
hf_model://owner/repo or a bare HF id (a hub snapshot, skillbank.modelref.download), or a LoRA adapter
folder (adapter_config.json: what a LoRA run of either backend exports), applied to its base model and
merged for fast generation. An adapter's base: model.base_model_path when set, else the adapter's
base_model_name_or_path where it resolves here, else the base_model of its skillbank_recipe.json.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from skillbank import modelref
from skillbank.data.examples import has_processor

MODEL_MARKERS = ("config.json", "adapter_config.json")  # a full model, or a LoRA adapter


def resolve_model_path(name: str, *, key: str = "model.model_name") -> str:
    """A local folder for `name` (a model, or a LoRA adapter): the folder, or a hub snapshot."""
    return modelref.local_folder(name, where=key, markers=MODEL_MARKERS)


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
    from transformers import AutoModelForImageTextToText

    from skillbank.compat import padded_causal_mask, qwen25_temporal

    qwen25_temporal.install()  # frame order at fps > 2 on Qwen2.5-VL, as training saw it
    padded_causal_mask.install()  # left-padded batches: the same mask without vmap (batched generation's hot spot)
    path = resolve_model_path(model_name)
    device = pick_device(num_gpus)
    torch_dtype = pick_dtype(dtype, device)
    sharded = num_gpus > 1 and device.type == "cuda"
    kwargs: dict[str, Any] = {"dtype": torch_dtype}
    if sharded:
        kwargs["device_map"] = "auto"  # one model over the visible GPUs (accelerate)
    if enable_lora or modelref.is_adapter(path):
        from peft import PeftModel

        base = adapter_base(path, base_model_path)
        model = AutoModelForImageTextToText.from_pretrained(base, **kwargs)
        model = PeftModel.from_pretrained(model, path, config=modelref.lora_config(path)).merge_and_unload()
        processor_path = path if has_processor(path) else base
    else:
        model = AutoModelForImageTextToText.from_pretrained(path, **kwargs)
        processor_path = path
    if not sharded:
        model.to(device)
    model.eval()
    processor = load_processor(processor_path)
    return LoadedModel(model=model, processor=processor, device=device, path=path, processor_path=processor_path)


def adapter_base(adapter: str, given: str = "") -> str:
    """The local folder of an adapter's base model: `given` (model.base_model_path), else the adapter's
    base_model_name_or_path (cosmos-rl and the local backend write the model they trained from), else its
    recipe's base_model; a hub id is downloaded. An InputError names what was tried."""
    import json
    from pathlib import Path

    from skillbank import recipe
    from skillbank.errors import InputError

    if given:
        return resolve_model_path(given, key="model.base_model_path")
    tried = []
    try:
        named = str(json.loads((Path(adapter) / modelref.ADAPTER_CONFIG).read_text(encoding="utf-8")).get("base_model_name_or_path") or "")
    except (OSError, ValueError):
        named = ""
    found = recipe.read(adapter)
    for candidate in (named, str((found.recipe if found else {}).get("base_model") or "")):
        if not candidate or candidate in tried:
            continue
        tried.append(candidate)
        ref = modelref.parse(candidate)
        if ref.kind == "hub" or (ref.kind == "local" and not modelref.folder_problem(ref.path)):
            return resolve_model_path(candidate, key="model.base_model_path")
    raise InputError(f"{adapter} is a LoRA adapter whose base model is not here ({', '.join(tried) or 'named nowhere'})",
                     where="model.base_model_path", fix="set model.base_model_path to the model the adapter was trained on")


def load_processor(path: str) -> Any:
    """The folder's processor, padding on the left (batched generation appends on the right)."""
    from transformers import AutoProcessor

    processor = AutoProcessor.from_pretrained(path)
    processor.tokenizer.padding_side = "left"
    if processor.tokenizer.pad_token_id is None:
        processor.tokenizer.pad_token = processor.tokenizer.eos_token
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    return processor


def model_type(folder: str) -> str:
    """config.json's model_type of a model folder ("" when it has none): picks the reasoning prompt."""
    import json
    from pathlib import Path

    config = Path(folder) / "config.json"
    try:
        return str(json.loads(config.read_text(encoding="utf-8")).get("model_type", ""))
    except (OSError, ValueError):
        return ""
