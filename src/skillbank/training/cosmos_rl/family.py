"""Which Qwen-VL family a model belongs to: it decides the pixels per vision token and the data packer.

cosmos-rl registers `Qwen2_5_VLM_DataPacker` for qwen2_5_vl and `Qwen3_VL_DataPacker` for
qwen3_vl_moe; dense qwen3_vl (Cosmos-Reason2) has no registered packer and goes through the generic
`HFVLMDataPacker` (cosmos_rl/dispatcher/data/packer/, v0.4.7). The family is decided once, here,
and written into the TOML's `custom.model_family`, so the dataset script needs no hub lookup.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from skillbank.errors import InputError
from skillbank.modelref import HF_SCHEME

MODEL_KEY = "policy.model_name_or_path"


@dataclass(frozen=True)
class ModelFamily:
    model_type: str  # config.json's model_type
    patch_size: int  # vision patch size; a token covers (patch * spatial_merge 2)**2 pixels
    packer: str  # class name in cosmos_rl.dispatcher.data.packer

    @property
    def pixels_per_token(self) -> int:
        return (self.patch_size * 2) ** 2


FAMILIES = {
    f.model_type: f
    for f in (
        ModelFamily("qwen2_5_vl", 14, "Qwen2_5_VLM_DataPacker"),
        ModelFamily("qwen3_vl", 16, "HFVLMDataPacker"),
        ModelFamily("qwen3_vl_moe", 16, "Qwen3_VL_DataPacker"),
    )
}

# Name patterns for models not on disk yet (dry run, or an id cosmos-rl downloads itself); first match wins.
_NAME_PATTERNS = (
    (re.compile(r"qwen3[-_.]?vl.*-a\d+b"), "qwen3_vl_moe"),
    (re.compile(r"qwen3[-_.]?vl|cosmos[-_]reason2"), "qwen3_vl"),
    (re.compile(r"qwen2[-_.]?5[-_.]?vl|cosmos[-_]reason1"), "qwen2_5_vl"),
)


def family_of(model: str) -> ModelFamily:
    """The family of a local model folder (from config.json) or of a hub id / hf_model:// (by name)."""
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
