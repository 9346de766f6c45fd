"""A new entry of the model table, from a local config.json or a Hugging Face snapshot folder (offline).

`skillbank models add` (commands/models.py) reads the config here, checks what a config alone can say
(`config_problems`: the shape keys present, the heads dividing), has transformers build it on the meta
device (models.params.count_on_meta), checks the family against cosmos-rl's, then `write`s the entry and the
config beside the others and regenerates what reads the table (`skillbank schemas generate`'s code path).
"""

from __future__ import annotations

import datetime
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from skillbank import atomic
from skillbank.errors import InputError
from skillbank.modelref import HUB_ID
from skillbank.models import table

SNAPSHOT = re.compile(r"/models--(?P<org>[^/]+?)--(?P<name>[^/]+)/snapshots/(?P<rev>[0-9a-f]{7,64})/?$")


@dataclass(frozen=True)
class Source:
    """Where the config came from: the file read, and the URL and date the entry states."""

    file: Path
    url: str
    note: str


def read_config(config: str | None, snapshot: str | None, model_id: str, url: str | None = None) -> tuple[dict[str, Any], str, Source]:
    """(the config's data, its text as given, where it came from). --snapshot DIR reads DIR/config.json; a hub-cache
    snapshot folder (models--ORG--NAME/snapshots/REV) gives the config's Hub URL at that revision."""
    if bool(config) == bool(snapshot):
        raise InputError("give the architecture once: --config PATH (a config.json) or --snapshot DIR (a downloaded model folder)",
                         where="--config", fix="pass exactly one of --config and --snapshot")
    path = Path(config or Path(snapshot or "") / "config.json").expanduser()
    flag = "--config" if config else "--snapshot"
    if not path.is_file():
        raise InputError(f"{path} is not a file" if config else f"{snapshot} holds no config.json", where=flag,
                         fix="point --config at a model's config.json, or --snapshot at a Hugging Face model folder (it holds config.json)")
    text = path.read_text(encoding="utf-8")
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise InputError(f"{path} is not JSON: {exc}", where=flag, fix="pass the model's config.json as published") from None
    if not isinstance(data, dict):
        raise InputError(f"{path} is not a JSON object", where=flag, fix="pass the model's config.json as published")
    note = f"added by `skillbank models add` from {path.resolve()}"
    hub = SNAPSHOT.search(str(path.parent.resolve()) + "/") if snapshot else None
    if url is None and hub is not None and f"{hub['org']}/{hub['name']}".lower() == model_id.lower():
        url = f"https://huggingface.co/{model_id}/blob/{hub['rev']}/config.json"
    return data, text if text.endswith("\n") else text + "\n", Source(path, url or f"https://huggingface.co/{model_id}/blob/main/config.json", note)


def check_id(model_id: str) -> None:
    if not HUB_ID.match(model_id or ""):
        raise InputError(f"--id {model_id!r} is not an owner/name Hugging Face id", where="--id", fix="pass it as the Hub spells it, e.g. Qwen/Qwen2.5-VL-3B-Instruct")
    entry = table.get(model_id)
    if entry is not None:
        raise InputError(f"{model_id} is in the model table already ({entry.path})", where="--id",
                         fix="pick another id, or remove its entry and config first to replace it")


def config_problems(data: dict[str, Any]) -> list[str]:
    """What a config alone says is wrong for the bank: the keys the counts and the checks read, and heads that
    divide (attention heads by KV heads; hidden size by attention heads unless head_dim is stated; the vision tower's)."""
    text = {**data, **(data.get("text_config") or {})}
    vision = data.get("vision_config") or {}
    out = []
    missing = [k for k in ("model_type", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size", "vocab_size") if not text.get(k)]
    if missing:
        out.append(f"the config states no {', '.join(missing)}")
    if not vision.get("patch_size"):
        out.append("the config has no vision_config.patch_size: not a vision-language model the bank trains")
    heads, kv, hidden = int(text.get("num_attention_heads") or 0), int(text.get("num_key_value_heads") or text.get("num_attention_heads") or 0), int(text.get("hidden_size") or 0)
    if heads and kv and heads % kv:
        out.append(f"num_attention_heads {heads} is not a multiple of num_key_value_heads {kv}")
    if heads and hidden and not text.get("head_dim") and hidden % heads:
        out.append(f"hidden_size {hidden} is not a multiple of num_attention_heads {heads} (and no head_dim is stated)")
    v_heads, v_hidden = int(vision.get("num_heads") or 0), int(vision.get("hidden_size") or 0)
    if v_heads and v_hidden and v_hidden % v_heads:
        out.append(f"vision_config.hidden_size {v_hidden} is not a multiple of vision_config.num_heads {v_heads}")
    return out


def entry_text(model_id: str, family: str, gated: bool, description: str, source: Source, aliases: list[str]) -> str:
    credentials = ["HF_TOKEN"] if gated else []
    data = {"id": model_id, "family": family, "gated": gated, "credentials": credentials, "description": description,
            "config": table.config_file(model_id).name,
            "source": {"url": source.url, "date": datetime.date.today().isoformat(), "note": source.note}}
    if aliases:
        data["aliases"] = aliases
    import yaml

    head = ("# One entry of the model table (src/skillbank/models/table.py). `skillbank models add` writes these;\n"
            "# `skillbank schemas generate` regenerates what reads them (configs/counts.json, the supported-models tables).\n")
    return head + yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=120)


def write(model_id: str, entry: str, config_text: str, row: dict[str, Any]) -> list[Path]:
    """The entry, its config and its counts.json row, written atomically (the other rows kept); the files written."""
    paths = [table.config_file(model_id), table.entry_file(model_id), table.COUNTS_FILE]
    atomic.write_text(paths[0], config_text)
    atomic.write_text(paths[1], entry)
    counts = table.counts()
    counts[model_id] = row
    atomic.write_text(paths[2], json.dumps(counts, indent=2, sort_keys=True) + "\n")
    table.clear()
    return paths
