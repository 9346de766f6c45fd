"""A model's parameters from its real architecture: its config.json, counted on the meta device.

One counter for the bank: `count_on_meta` builds the model from config.json with transformers under
`torch.device("meta")` (no weights, no memory) and counts what a training run holds: every parameter,
the largest FSDP unit (a vision block or decoder layer, what FSDP gathers at once), what lies outside
the units (embeddings, lm_head, mergers: the root unit) and, for LoRA, the adapters peft adds for
policy.lora's r / target_modules (peft on meta too).

The config comes from a local model folder, the local Hugging Face cache (an owner/repo id), or the model
table (models.table: the public config.json of every model the bank knows, so that planning works
offline). `configs/counts.json` holds the meta-device counts of the table's configs, keyed by the config
keys that decide the count, with a table of each config's leaf modules (LoRA's adapters and modules_to_save
from it) (`skillbank schemas generate` writes it; a test recounts them): the light path (`lookup` /
`model_params` / `light_count`: spec, preflight, every disk figure, the AutoML dry run) reads it without
importing torch; `skillbank plan` counts whatever config it finds for memory and time.

One behaviour for a model the bank cannot count: a hub id that is neither in the table nor in the local
Hugging Face cache is refused with `unknown_model`'s message and fix (`skillbank models add`) by spec,
preflight, plan and the AutoML dry run alike; nothing is guessed from its name.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from skillbank import modelref
from skillbank.errors import InputError
from skillbank.models import table

CONFIGS = table.CONFIGS
COUNTS_FILE = table.COUNTS_FILE
MODEL_KEY = "policy.model_name_or_path"
# LoRA parameters per model parameter and unit of rank when only the weights are known (a local folder of an unknown shape):
# r x (in + out) / (in x out) at hidden 4096, an upper bound for the 7B/8B models (Qwen3-VL-8B's 7 default target modules: ~65% of it).
ADAPTER_SHARE_PER_RANK = 2 / 4096


@dataclass(frozen=True)
class ModelConfig:
    """A config.json found for a model reference, and where it was found (said in every figure)."""

    data: dict[str, Any]
    path: Path
    where: str
    bundled: str | None = None  # the owner/repo of a config the model table ships


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


def unknown_model(value: str, where: str = MODEL_KEY) -> InputError:
    """The one refusal of a model the bank cannot count (spec, preflight, plan and the AutoML dry run say the same)."""
    return InputError(
        f"unknown model {value!r}: not in the bank's model table, not a local model folder with config.json, and not in the local "
        "Hugging Face cache, so its parameters, memory and parallel layouts cannot be known (nothing is guessed from the name)",
        where=where,
        fix="add it once with `skillbank models add --config CONFIG.json --id ORG/NAME` (or --snapshot DIR: a downloaded model folder), "
            f"or point {where} at a local model folder with config.json; the table: `skillbank models list` ({', '.join(table.ids())})",
    )


def bundled_config(repo: str) -> Path | None:
    entry = table.get(repo)
    return entry.config_file if entry is not None else None


def bundled_repos() -> list[str]:
    return table.ids()


def find_config(value: str) -> ModelConfig | None:
    """The config.json a model reference names, without the network: the folder's, the local hub
    cache's snapshot, else the model table's; None when none is found."""
    ref = modelref.parse(value)
    path, where, bundled = None, "", None
    if ref.kind == "local" and ref.path is not None and (ref.path / "config.json").is_file():
        path = ref.path / "config.json"
        where = str(path)
    elif ref.kind == "hub" and ref.repo:
        cached = modelref.cached_file(ref.repo, "config.json")
        entry = table.get(ref.repo)
        if cached is not None:
            path, where = cached, f"the local Hugging Face cache's config.json of {ref.repo}"
        elif entry is not None:
            path, bundled, where = entry.config_file, entry.id, f"the bundled config.json of {entry.id}"
    if path is None:
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return ModelConfig(data, path, where, bundled)


def require_config(value: str, where: str = MODEL_KEY) -> ModelConfig:
    """find_config, or unknown_model (a hub id) / a missing-folder InputError (a path that holds no config.json here)."""
    config = find_config(value) if value.strip() else None
    if config is not None:
        return config
    ref = modelref.parse(value)
    if ref.kind == "local" or ref.path is not None:
        raise InputError(f"{value!r} holds no config.json on this machine", where=where,
                         fix="point it at a Hugging Face model folder with config.json (a path only the training node has: plan with --path-map LOCAL=REMOTE)")
    raise unknown_model(value, where)


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


def known_count(config: ModelConfig, lora: Any = None) -> ParamCount | None:
    """The shipped meta-device count of a config with a table entry's shape; no torch. With `lora` (policy.lora, on)
    the adapters from the row's table of leaf modules (with_lora)."""
    sig = signature(config.data)
    rows = table.counts()
    order = ([config.bundled] if config.bundled in rows else []) + sorted(rows)
    for repo in order:
        row = rows[repo]
        if row.get("signature") == sig:
            source = f"a meta-device count of {config.where}" + ("" if config.bundled == repo else f" (the shape of the bundled {repo})")
            return with_lora(row, lora, source)
    return None


def with_lora(row: dict[str, Any], lora: Any, source: str) -> ParamCount:
    """A count row (counts.json's, or count_in_child's) as a ParamCount; with `lora` (policy.lora, on) the trained
    parameters from its leaf-module table: r x (in + out) of each Linear whose name is in target_modules, + the
    parameters of modules_to_save (as count_on_meta's peft counts them). A row without the table: every parameter
    counted as trained (an upper bound)."""
    total = int(row["total"])
    if lora is None or not getattr(lora, "enable", False) or "modules" not in row:
        return ParamCount(total, total, 0, row["largest_unit"], row["root"], source)
    modules = row["modules"]
    adapters = sum(int(lora.r) * modules[name][0] for name in {t.rsplit(".", 1)[-1] for t in lora.target_modules} if name in modules)
    saved = sum(modules[name][1] for name in (lora.modules_to_save or []) if name in modules)
    return ParamCount(total, adapters + saved, adapters, row["largest_unit"], row["root"], source)


def light_count(value: str, lora: Any = None, where: str = MODEL_KEY) -> ParamCount | None:
    """The parameters and, with `lora`, the trained ones, without torch here, in `lookup`'s order: the shipped count of a
    known shape (known_count: LoRA's adapters from its leaf-module table, the figures count_on_meta gives); else the weights
    of a local folder (LoRA's adapters then bounded by their rank: ADAPTER_SHARE_PER_RANK x r of the parameters, the module
    table being unknown); else its config counted in a child (count_in_child, its leaf modules too). None: a path not on
    this machine (the node's preflight counts it there); a hub id the bank cannot count: unknown_model, nothing guessed.
    Every disk figure counts with it (runs.disk)."""
    config = find_config(value) if value.strip() else None
    known = known_count(config, lora) if config is not None else None
    if known is not None:
        return known
    lora_on = lora is not None and getattr(lora, "enable", False)
    count = lookup(value, where)
    if count is None or not lora_on:
        return count
    if config is not None and not count.source.startswith("weights in "):
        return count_in_child(config, lora)
    adapters = int(min(count.total, count.total * ADAPTER_SHARE_PER_RANK * lora.r))
    return ParamCount(count.total, adapters, adapters, count.largest_unit, count.root,
                      count.source + f"; LoRA adapters bounded by rank {lora.r} ({ADAPTER_SHARE_PER_RANK * 4096:g}/4096 of the parameters per unit of rank)")


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


def lookup(value: str, where: str = MODEL_KEY) -> ParamCount | None:
    """The parameters of the model `value` names, without importing torch here: the shipped count of a config
    with a table entry's shape, else the weights on disk of a local folder, else its config.json counted on the
    meta device in a child process (cached by the file). None: a path that is not on this machine (the node's
    preflight counts it there). A hub id the bank cannot count: unknown_model (InputError)."""
    config = find_config(value) if value.strip() else None
    ref = modelref.parse(value)
    known = known_count(config) if config is not None else None
    if known is not None:
        return known
    if ref.kind == "local" and ref.path is not None and ref.path.is_dir():
        headers = safetensors_params(ref.path)
        if headers is not None:  # the tensors' shapes in the files' headers: exact, even when a file is cut short
            count, problems = headers
            how = f"the tensor shapes in {ref.path}'s safetensors headers" + (f" ({'; '.join(problems)})" if problems else "")
            return ParamCount(int(count), int(count), 0, 0, 0, how)
        size = weights_bytes(ref.path)
        if size:
            data = config.data if config is not None else {}
            total = int(size / (4 if str(data.get("torch_dtype", data.get("dtype", ""))) == "float32" else 2))
            return ParamCount(total, total, 0, 0, 0, f"weights in {ref.path}")
    if config is not None:
        return count_in_child(config)
    if ref.kind == "local" or ref.path is not None:
        return None
    raise unknown_model(value, where)


def model_params(value: str, where: str = MODEL_KEY) -> tuple[float | None, str]:
    """(parameter count, how it was found) as `lookup` finds it; (None, why) for a path not on this machine."""
    count = lookup(value, where)
    if count is None:
        return None, f"{value} is not on this machine"
    return float(count.total), count.source


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


def count_in_child(config: ModelConfig, lora: Any = None) -> ParamCount:
    """count_on_meta and leaf_modules in a child Python (torch stays out of this process), remembered in the file cache
    by the config file's path, size and mtime; with `lora` the trained parameters as with_lora counts them."""
    from skillbank.filecache import FileCache
    from skillbank.paths import child_env

    with FileCache("param_count") as cache:
        hit = cache.get(str(config.path))
        if hit is None or "modules" not in hit:
            proc = subprocess.run([sys.executable, "-m", "skillbank.models.params", str(config.path)], capture_output=True, text=True, env=child_env())
            if proc.returncode != 0:
                lines = [line for line in proc.stderr.splitlines() if line.strip()] or [f"exit {proc.returncode}"]
                raise InputError(f"{config.where} could not be built on the meta device: {lines[-1]}", where=MODEL_KEY,
                                 fix="point it at a Qwen-VL model folder whose config.json transformers can load")
            hit = json.loads(proc.stdout.strip().splitlines()[-1])
            cache.put(str(config.path), hit)
    return with_lora(hit, lora, f"a meta-device count of {config.where}")


def count_row(config: ModelConfig) -> dict[str, Any]:
    count = count_on_meta(config)
    return {"signature": signature(config.data), "total": count.total, "largest_unit": count.largest_unit, "root": count.root,
            "modules": leaf_modules(config)}


def count_rows(entries: Any = None) -> dict[str, Any]:
    """The table's configs recounted on the meta device: counts.json's rows (with each config's leaf-module table)."""
    return {e.id: count_row(find_config_bundled(e.id)) for e in (entries if entries is not None else table.all_entries())}


def leaf_modules(config: ModelConfig) -> dict[str, list[int]]:
    """Per leaf-module name (q_proj, lm_head, ...): [sum of in + out features over its nn.Linear modules, sum of its parameters]:
    what LoRA's adapters (r x (in + out) per targeted Linear) and modules_to_save cost, read by known_count without torch."""
    import torch
    from transformers import AutoConfig, AutoModelForImageTextToText

    with torch.device("meta"):
        model = AutoModelForImageTextToText.from_config(AutoConfig.from_pretrained(str(config.path)))
    out: dict[str, list[int]] = {}
    for name, module in model.named_modules():
        if not name or any(True for _ in module.children()):
            continue
        entry = out.setdefault(name.rsplit(".", 1)[-1], [0, 0])
        if isinstance(module, torch.nn.Linear):
            entry[0] += module.in_features + module.out_features
        entry[1] += sum(p.numel() for p in module.parameters(recurse=False))
    return dict(sorted(out.items()))


def counts_text() -> str:
    """counts.json's text (`skillbank schemas generate` writes it and `--check` compares it)."""
    return json.dumps(count_rows(), indent=2, sort_keys=True) + "\n"


def find_config_bundled(repo: str) -> ModelConfig:
    entry = table.get(repo)
    if entry is None:
        raise KeyError(repo)
    return ModelConfig(json.loads(entry.config_file.read_text(encoding="utf-8")), entry.config_file, f"the bundled config.json of {entry.id}", entry.id)


def _main(argv: list[str]) -> int:
    """The child of count_in_child: one config.json counted on the meta device, as one JSON line."""
    path = Path(argv[0])
    config = ModelConfig(json.loads(path.read_text(encoding="utf-8")), path, str(path))
    count = count_on_meta(config)
    print(json.dumps({"total": count.total, "largest_unit": count.largest_unit, "root": count.root, "modules": leaf_modules(config)}))
    return 0


if __name__ == "__main__":
    raise SystemExit(_main(sys.argv[1:]))
