"""Which Qwen-VL family a model belongs to: it decides the pixels per vision token and the data packer.

cosmos-rl registers `Qwen2_5_VLM_DataPacker` for qwen2_5_vl and `Qwen3_VL_DataPacker` for
qwen3_vl_moe; dense qwen3_vl (Cosmos-Reason2) has no registered packer and goes through the generic
`HFVLMDataPacker` (cosmos_rl/dispatcher/data/packer/, v0.4.7). The family is decided once, here,
and written into the TOML's `custom.model_family`, so the dataset script needs no hub lookup: a model of
the model table (skillbank.models.table) has its entry's family, a local folder its config.json's model_type,
anything else its name.

What tensor and context parallelism each family's model asserts when cosmos-rl shards it
(`check_tp_compatible` / `check_cp_compatible`, called by cosmos_rl.utils.parallelism before the
model is parallelised, i.e. after launch) is `parallel_problems`, checked before: qwen2_5_vl is
cosmos-rl's own model (policy/model/qwen2_5_vl), whose check asks tp_size to divide the attention heads,
the KV heads and the vision tower's heads (its parallelize merges TP into FSDP for the vision tower, but
the check stands), and cp_size x tp_size to divide the vision and attention heads; qwen3_vl goes through
HFModel (policy/model/hf_models: TP on the language model only, its tp plan leaves the vision encoder
alone): tp_size divides the attention and KV heads, and cp_size must be 1; qwen3_vl_moe: tp_size divides
the experts, cp_size the vision and attention heads.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from skillbank.errors import InputError
from skillbank.modelref import HF_SCHEME
from skillbank.models import table

MODEL_KEY = "policy.model_name_or_path"


@dataclass(frozen=True)
class ModelFamily:
    model_type: str  # config.json's model_type
    patch_size: int  # vision patch size; a token covers (patch * spatial_merge 2)**2 pixels
    packer: str  # class name in cosmos_rl.dispatcher.data.packer
    tp_divides: tuple[str, ...] = ("attention", "kv")  # the head counts (models.table.Heads) tp_size must divide
    cp_divides: tuple[str, ...] | None = None  # ... that cp_size x tp_size must divide; None: cp_size must be 1
    cp_times_tp: bool = True  # cp_divides is checked against cp_size x tp_size (else cp_size alone)

    @property
    def pixels_per_token(self) -> int:
        return (self.patch_size * 2) ** 2


FAMILIES = {
    f.model_type: f
    for f in (
        ModelFamily("qwen2_5_vl", 14, "Qwen2_5_VLM_DataPacker", ("attention", "kv", "vision"), ("vision", "attention")),
        ModelFamily("qwen3_vl", 16, "HFVLMDataPacker", ("attention", "kv"), None),
        ModelFamily("qwen3_vl_moe", 16, "Qwen3_VL_DataPacker", ("experts",), ("vision", "attention"), cp_times_tp=False),
    )
}

# Name patterns for models not on disk yet (dry run, or an id cosmos-rl downloads itself); first match wins.
_NAME_PATTERNS = (
    (re.compile(r"qwen3[-_.]?vl.*-a\d+b"), "qwen3_vl_moe"),
    (re.compile(r"qwen3[-_.]?vl|cosmos[-_]reason2"), "qwen3_vl"),
    (re.compile(r"qwen2[-_.]?5[-_.]?vl|cosmos[-_]reason1"), "qwen2_5_vl"),
)


HEAD_WORDS = {"attention": "attention heads", "kv": "KV heads", "vision": "vision tower heads", "experts": "experts"}


def parallel_problems(heads: table.Heads, family: ModelFamily, tp: int, cp: int = 1) -> list[str]:
    """What cosmos-rl's check_tp_compatible / check_cp_compatible of the family would assert after launch, said
    before it ([] when tp_size and cp_size fit the model's heads)."""
    counts = heads.to_dict()
    out = []
    for part in family.tp_divides if tp > 1 else ():
        if counts.get(part, 0) % tp:
            out.append(f"tp_size {tp} does not divide the {counts.get(part, 0)} {HEAD_WORDS[part]}")
    if cp > 1:
        if family.cp_divides is None:
            out.append(f"cp_size {cp}: cosmos-rl trains {family.model_type} through its HFModel, which has no context parallelism (cp_size must be 1)")
        else:
            size, what = (cp * tp, f"cp_size {cp} x tp_size {tp} = {cp * tp}") if family.cp_times_tp else (cp, f"cp_size {cp}")
            out += [f"{what} does not divide the {counts.get(part, 0)} {HEAD_WORDS[part]}" for part in family.cp_divides if counts.get(part, 0) % size]
    return out


def tp_sizes(heads: table.Heads, family: ModelFamily, most: int = 8) -> list[int]:
    """The tp_size values up to `most` (a node's GPUs) that the model's heads allow."""
    return [tp for tp in range(1, most + 1) if not parallel_problems(heads, family, tp)]


def parallel_check(model: str, config: dict, tp: int, cp: int = 1) -> tuple[str, str, str] | None:
    """(message, fix, dotted key) when tp_size / cp_size do not fit the heads of `model`'s config.json, as
    preflight reports it and plan refuses it; None when they fit (or the family is not one cosmos-rl trains:
    the family check says so)."""
    family = FAMILIES.get(str(config.get("model_type", "")))
    if family is None:
        return None
    heads = table.heads_of(config)
    problems = parallel_problems(heads, family, tp, cp)
    if not problems:
        return None
    allowed = ", ".join(map(str, tp_sizes(heads, family)))
    fix = f"set policy.parallelism.tp_size to one of {allowed} (the model's heads: `skillbank models list`)"
    if cp > 1 and family.cp_divides is None:
        fix += "; cp_size 1"
    key = "policy.parallelism.tp_size" if problems[0].startswith("tp_size") else "policy.parallelism.cp_size"
    return f"{model}: " + "; ".join(problems) + " (cosmos-rl asserts it when it shards the model, after launch)", fix, key


def family_of(model: str) -> ModelFamily:
    """The family of a model of the table (its entry's), a local model folder (config.json's model_type) or
    another hub id / hf_model:// (by name)."""
    entry = table.resolve(model)
    if entry is not None and entry.family in FAMILIES:
        return FAMILIES[entry.family]
    folder = Path(model).expanduser()
    if (folder / "config.json").is_file():
        model_type = _model_type(folder / "config.json")
        if model_type in FAMILIES:
            return FAMILIES[model_type]
        raise InputError(
            f"model type {model_type!r} in {folder / 'config.json'} is not supported by the cosmos-rl backend",
            where=MODEL_KEY,
            fix=f"use a model of one of these types: {', '.join(FAMILIES)}",
        )
    name = model.removeprefix(HF_SCHEME).lower()
    for pattern, model_type in _NAME_PATTERNS:
        if pattern.search(name):
            return FAMILIES[model_type]
    raise InputError(
        f"cannot tell the model family of {model!r} (not a folder with config.json, and the name names no Qwen-VL family)",
        where=MODEL_KEY,
        fix="use hf_model://nvidia/Cosmos-Reason2-8B, a Qwen2.5-VL / Qwen3-VL id, or a local folder with config.json; "
            "for a checkpoint only the training machine has, pass --model-family (" + " | ".join(FAMILIES) + ") or --path-map LOCAL=REMOTE "
            "so that its config.json is read here",
    )


def node_family(model: str, *, here: str | None = None, given: str | None = None) -> ModelFamily:
    """The family of the model a job loads on its node (`model`, maybe a path only the node has):
    `given` (--model-family) when set, checked against the config.json when this machine can read one;
    else the config.json at `here` (the model's LOCAL path under --path-map); else the model's name."""
    local = Path(here).expanduser() if here else None
    readable = local is not None and (local / "config.json").is_file()
    if given is not None:
        if given not in FAMILIES:
            raise InputError(f"unknown model family {given!r}", where="--model-family", fix=f"one of: {', '.join(FAMILIES)}")
        found = _model_type(local / "config.json") if readable else None  # type: ignore[operator]
        if found is not None and found != given:
            raise InputError(f"--model-family {given} disagrees with {local / 'config.json'} (model_type {found!r})",  # type: ignore[operator]
                             where="--model-family", fix=f"drop --model-family, or pass --model-family {found}")
        return FAMILIES[given]
    return family_of(str(local) if readable else model)


def _model_type(config_path: Path) -> str:
    try:
        return str(json.loads(config_path.read_text(encoding="utf-8")).get("model_type", ""))
    except (OSError, ValueError) as exc:
        raise InputError(f"cannot read {config_path}: {exc}", where=MODEL_KEY, fix="point at a Hugging Face model folder") from None
