"""A model's parameters from its real architecture: its config.json, counted on the meta device.

One counter for the bank: `count_on_meta` builds the model from config.json with transformers under
`torch.device("meta")` (no weights, no memory) and counts what a training run holds: every parameter,
the largest FSDP unit (a vision block or decoder layer, what FSDP gathers at once), what lies outside
the units (embeddings, lm_head, mergers: the root unit) and, for LoRA, the adapters peft adds for
policy.lora's r / target_modules (peft on meta too).

The config comes from a local model folder, the local Hugging Face cache (an owner/repo id), or the
config.json files of the public Cosmos-Reason models shipped in `configs/` so that planning works
offline. `configs/counts.json` holds the meta-device counts of those shipped files, keyed by the
config keys that decide the count (a test recounts them), with a table of the leaf modules (LoRA's adapters and
modules_to_save from it): the light path (`model_params`, `light_count`: every disk figure, preflight, `skillbank spec`)
reads it without importing torch; `skillbank plan` counts whatever config it finds for memory and time.
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
# LoRA parameters per model parameter and unit of rank when the shape is not a known one: r x (in + out) / (in x out)
# at hidden 4096, an upper bound for the 7B/8B models (Qwen3-VL-8B with the 7 default target modules: ~65% of it).
ADAPTER_SHARE_PER_RANK = 2 / 4096
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


def _known_row(config: ModelConfig) -> tuple[str, dict[str, Any]] | None:
    sig = signature(config.data)
    return next(((repo, row) for repo, row in _counts().items() if row.get("signature") == sig), None)


def known_count(config: ModelConfig, lora: Any = None) -> ParamCount | None:
    """The shipped meta-device count of a config with a bundled one's shape; no torch. With `lora` (policy.lora, on)
    the adapters from the row's table of Linear modules by name: r x (in + out) of each module whose name is in
    target_modules, + the parameters of modules_to_save (as count_on_meta's peft counts them)."""
    found = _known_row(config)
    if found is None:
        return None
    repo, row = found
    source = f"a meta-device count of {config.where}" + ("" if config.bundled == repo else f" (the shape of the bundled {repo})")
    total = int(row["total"])
    if lora is None or not getattr(lora, "enable", False) or "modules" not in row:
        return ParamCount(total, total, 0, row["largest_unit"], row["root"], source)
    modules = row["modules"]
    adapters = sum(int(lora.r) * modules[name][0] for name in {t.rsplit(".", 1)[-1] for t in lora.target_modules} if name in modules)
    saved = sum(modules[name][1] for name in (lora.modules_to_save or []) if name in modules)
    return ParamCount(total, adapters + saved, adapters, row["largest_unit"], row["root"], source)


def light_count(value: str, lora: Any = None) -> ParamCount:
    """The parameters and, with `lora`, the trained ones, without torch: the shipped count of a known shape
    (known_count, the same figures count_on_meta gives), else `model_params` with the adapters bounded by
    their rank (ADAPTER_SHARE_PER_RANK x r of the parameters). Every disk figure counts with it (runs.disk)."""
    config = find_config(value)
    known = known_count(config, lora) if config is not None else None
    if known is not None:
        return known
    total, how = model_params(value)
    if lora is not None and getattr(lora, "enable", False):
        adapters = int(min(total, total * ADAPTER_SHARE_PER_RANK * lora.r))
        return ParamCount(int(total), adapters, adapters, 0, 0, how + f"; LoRA adapters bounded by rank {lora.r} ({ADAPTER_SHARE_PER_RANK * 4096:g}/4096 of the parameters per unit of rank)")
    return ParamCount(int(total), int(total), 0, 0, 0, how)


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
        size = weights_bytes(ref.path)
        if size:
            dtype = str((config.data if config else {}).get("torch_dtype", (config.data if config else {}).get("dtype", "")))
            return size / (4 if dtype == "float32" else 2), f"weights in {ref.path}"
    match = NAME_SIZE.search(value.rsplit("/", 1)[-1])
    if match:
        return float(match.group(1)) * 1e9, f"the {match.group(0)} in its name (no config.json found here)"
    return DEFAULT_PARAMS, "a conservative 8.8B figure (no config.json found here)"


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
        rows[repo] = {"signature": signature(config.data), "total": count.total, "largest_unit": count.largest_unit, "root": count.root,
                      "modules": leaf_modules(config)}
    return rows


def leaf_modules(config: ModelConfig) -> dict[str, list[int]]:
    """Per leaf-module name (q_proj, lm_head, ...): [sum of in + out features over its nn.Linear modules, sum of its parameters]:
    what LoRA's adapters (r x (in + out) per targeted Linear) and modules_to_save cost, read by known_count without torch."""
    import torch
    from transformers import AutoConfig, AutoModelForImageTextToText

    with torch.device("meta"):
        model = AutoModelForImageTextToText.from_config(AutoConfig.from_pretrained(str(config.path)))
    table: dict[str, list[int]] = {}
    for name, module in model.named_modules():
        if not name or any(True for _ in module.children()):
            continue
        entry = table.setdefault(name.rsplit(".", 1)[-1], [0, 0])
        if isinstance(module, torch.nn.Linear):
            entry[0] += module.in_features + module.out_features
        entry[1] += sum(p.numel() for p in module.parameters(recurse=False))
    return dict(sorted(table.items()))


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
