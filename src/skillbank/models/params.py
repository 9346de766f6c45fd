"""A model's parameters from its real architecture: its config.json, counted on the meta device.

One counter for the bank: `count_on_meta` builds the model from config.json with transformers under
`torch.device("meta")` (no weights, no memory) and counts what a training run holds: every parameter,
the largest FSDP unit (a vision block or decoder layer, what FSDP gathers at once), what lies outside
the units (embeddings, lm_head, mergers: the root unit) and, for LoRA, the adapters peft adds for
policy.lora's r / target_modules (peft on meta too).

The config comes from a local model folder, the local Hugging Face cache (an owner/repo id), or the
config.json files of the public Cosmos-Reason models shipped in `configs/` so that planning works
offline. `configs/counts.json` holds the meta-device counts of those shipped files, keyed by the
config keys that decide the count (a test recounts them): the light path (`model_params`, what preflight's disk estimate and `skillbank spec` use)
reads it without importing torch; `skillbank plan` counts whatever config it finds.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from skillbank import modelref

CONFIGS = Path(__file__).parent / "configs"
COUNTS_FILE = CONFIGS / "counts.json"
DEFAULT_PARAMS = 8.8e9  # Cosmos-Reason2-8B with its vision tower, when nothing better is known
NAME_SIZE = re.compile(r"(?<![0-9.])(\d+(?:\.\d+)?)[bB](?![a-zA-Z])")


@dataclass(frozen=True)
class ModelConfig:
    """A config.json found for a model reference, and where it was found (said in every figure)."""

    data: dict[str, Any]
    path: Path
    where: str
    bundled: str | None = None  # the owner/repo of a config shipped with the bank


@dataclass(frozen=True)
class ParamCount:
    total: int
    trainable: int
    lora: int  # adapter parameters (0 without LoRA)
    largest_unit: int  # parameters of the largest FSDP unit (vision block / decoder layer)
    root: int  # parameters outside the units (embeddings, lm_head, mergers, final norm)
    source: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def bundled_config(repo: str) -> Path | None:
    path = CONFIGS / (repo.replace("/", "--") + ".json")
    return path if path.is_file() else None


def bundled_repos() -> list[str]:
    return sorted(p.stem.replace("--", "/") for p in CONFIGS.glob("*--*.json"))


def find_config(value: str) -> ModelConfig | None:
    """The config.json a model reference names, without the network: the folder's, the local hub
    cache's snapshot, else the bank's copy for a public Cosmos-Reason id; None when none is found."""
    ref = modelref.parse(value)
    path, where, bundled = None, "", None
    if ref.kind == "local" and ref.path is not None and (ref.path / "config.json").is_file():
        path = ref.path / "config.json"
        where = str(path)
    elif ref.kind == "hub" and ref.repo:
        cached = modelref.cached_file(ref.repo, "config.json")
        if cached is not None:
            path, where = cached, f"the local Hugging Face cache's config.json of {ref.repo}"
        else:
            path = bundled_config(ref.repo)
            bundled = ref.repo if path else None
            where = f"the bundled config.json of {ref.repo}"
    if path is None:
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return ModelConfig(data, path, where, bundled)


def _counts() -> dict[str, Any]:
    try:
        return json.loads(COUNTS_FILE.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


SHAPE_KEYS = ("model_type", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "head_dim",
              "vocab_size", "tie_word_embeddings", "depth", "num_heads", "out_hidden_size", "patch_size", "temporal_patch_size",
              "spatial_merge_size", "num_position_embeddings", "deepstack_visual_indexes", "in_channels", "in_chans")


def signature(data: dict[str, Any]) -> str:
    """The keys that decide the parameter count (a config re-saved by another transformers version,
    with other dtypes or token ids, has the same one)."""
    def pick(d: dict[str, Any]) -> dict[str, Any]:
        return {k: d[k] for k in SHAPE_KEYS if k in d}

    text = {**pick(data), **pick(data.get("text_config") or {})}
    return json.dumps({"text": text, "vision": pick(data.get("vision_config") or {})}, sort_keys=True)


def known_count(config: ModelConfig) -> ParamCount | None:
    """The shipped meta-device count of a config with a bundled one's shape; no torch."""
    sig = signature(config.data)
    for repo, row in _counts().items():
        if row.get("signature") == sig:
            return ParamCount(row["total"], row["total"], 0, row["largest_unit"], row["root"],
                              f"a meta-device count of {config.where}" + ("" if config.bundled == repo else f" (the shape of the bundled {repo})"))
    return None


def count_on_meta(config: ModelConfig, lora: Any = None) -> ParamCount:
    """Build the model from config.json on the meta device and count (torch / transformers / peft
    imported here: a command that calls this is not on an agent's fast path)."""
    import torch
    from transformers import AutoConfig, AutoModelForImageTextToText

    hf_config = AutoConfig.from_pretrained(str(config.path))
    with torch.device("meta"):
        model = AutoModelForImageTextToText.from_config(hf_config)
    units = set(getattr(model, "_no_split_modules", None) or [])
    sizes = [sum(p.numel() for p in m.parameters()) for m in model.modules() if type(m).__name__ in units]
    total = sum(p.numel() for p in model.parameters())
    adapters = 0
    if lora is not None and getattr(lora, "enable", False):
        from peft import LoraConfig, get_peft_model

        with torch.device("meta"):
            peft_model = get_peft_model(model, LoraConfig(r=lora.r, lora_alpha=lora.lora_alpha, target_modules=list(lora.target_modules),
                                                          modules_to_save=lora.modules_to_save, bias="none"))
        trainable = sum(p.numel() for p in peft_model.parameters() if p.requires_grad)
        adapters = sum(p.numel() for n, p in peft_model.named_parameters() if "lora_" in n)
    else:
        trainable = total
    return ParamCount(total, trainable, adapters, max(sizes, default=0), total - sum(sizes),
                      f"a meta-device count of {config.where}")


def model_params(value: str) -> tuple[float, str]:
    """(parameter count, how it was found) without importing torch: the meta-device count shipped for
    a bundled config (or an identical one), else the weights on disk, else the size in the name, else 8.8B."""
    config = find_config(value)
    if config is not None:
        known = known_count(config)
        if known is not None:
            return float(known.total), known.source
    ref = modelref.parse(value)
    if ref.kind == "local" and ref.path is not None and ref.path.is_dir():
        headers = safetensors_params(ref.path)
        if headers is not None:  # the tensors' shapes in the files' headers: exact, even when a file is cut short
            count, problems = headers
            return float(count), f"the tensor shapes in {ref.path}'s safetensors headers" + (f" ({'; '.join(problems)})" if problems else "")
        size = weights_bytes(ref.path)
        if size:
            dtype = str((config.data if config else {}).get("torch_dtype", (config.data if config else {}).get("dtype", "")))
            return size / (4 if dtype == "float32" else 2), f"weights in {ref.path}"
    match = NAME_SIZE.search(value.rsplit("/", 1)[-1])
    if match:
        return float(match.group(1)) * 1e9, f"the {match.group(0)} in its name (no config.json found here)"
    return DEFAULT_PARAMS, "a conservative 8.8B figure (no config.json found here)"


def safetensors_problems(folder: Path) -> list[str]:
    """Weight files cut short (an interrupted download or copy): each one's bytes against what its header promises."""
    found = safetensors_params(folder)
    return found[1] if found is not None else []


def safetensors_params(folder: Path) -> tuple[int, list[str]] | None:
    """(parameters, problems) from the headers of the folder's *.safetensors (8-byte length, then JSON with each
    tensor's shape and data offsets); None without safetensors files or with an unreadable header. A file
    shorter than its header's last offset is named with both sizes."""
    import math
    import struct

    files = sorted(folder.glob("*.safetensors"))
    if not files:
        return None
    total, problems = 0, []
    for path in files:
        try:
            with open(path, "rb") as fh:
                (length,) = struct.unpack("<Q", fh.read(8))
                header = json.loads(fh.read(length)) if 0 < length < 100_000_000 else None
        except (OSError, struct.error, ValueError):
            header = None
        size = path.stat().st_size
        if not isinstance(header, dict):
            problems.append(f"{path.name} is truncated or not a safetensors file ({size:,} bytes, no readable header)")
            continue
        tensors = {k: v for k, v in header.items() if k != "__metadata__" and isinstance(v, dict)}
        total += sum(math.prod(t.get("shape") or [1]) for t in tensors.values())
        want = 8 + length + max((t.get("data_offsets") or [0, 0])[1] for t in tensors.values()) if tensors else size
        if size < want:
            problems.append(f"{path.name} is truncated: {size:,} of {want:,} bytes (an interrupted download or copy)")
    return (total, problems) if total else None


def weights_bytes(folder: Path) -> int:
    for pattern in ("*.safetensors", "*.bin"):
        size = sum(f.stat().st_size for f in folder.glob(pattern))
        if size:
            return size
    return 0


def count_rows() -> dict[str, Any]:
    """The bundled configs recounted on the meta device: counts.json's rows."""
    rows = {}
    for repo in bundled_repos():
        config = find_config_bundled(repo)
        count = count_on_meta(config)
        rows[repo] = {"signature": signature(config.data), "total": count.total, "largest_unit": count.largest_unit, "root": count.root}
    return rows


def counts_text() -> str:
    """counts.json's text (`skillbank schemas generate` writes it and `--check` compares it; run it after adding a config)."""
    return json.dumps(count_rows(), indent=2, sort_keys=True) + "\n"


def write_counts() -> dict[str, Any]:
    """Recount the bundled configs on the meta device into counts.json (`skillbank schemas generate` does it too)."""
    from skillbank import atomic

    text = counts_text()
    atomic.write_text(COUNTS_FILE, text)
    return json.loads(text)


def find_config_bundled(repo: str) -> ModelConfig:
    path = bundled_config(repo)
    if path is None:
        raise KeyError(repo)
    return ModelConfig(json.loads(path.read_text(encoding="utf-8")), path, f"the bundled config.json of {repo}", repo)


if __name__ == "__main__":
    print(json.dumps(write_counts(), indent=2))
