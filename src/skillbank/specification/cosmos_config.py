"""A cosmos-rl SFT config (a TOML the user ran cosmos-rl with, or the cosmos_config JSON that every
checkpoint keeps) read as a train spec, for `skillbank spec --from FILE`.

A key the config sets is taken as it is. A key it leaves out gets cosmos-rl's own default, since that
is what the run used (tp_size 2, enable_checkpoint false, model_max_length 4096, ...), never the
skill template's value behind the user's back; each place where the template would differ is listed,
so the agent can choose. Keys only cosmos-rl knows (compile, timestamp, resume, ...) are named and left
out; keys only the skill has (results_dir, validation.freq_in_epoch) take the template's value.
Which cosmos-rl key is read into which spec key is the writer's table, read backwards
(skillbank.specification.cosmos_keys, with the published recipes' spellings of the dataset keys).
cosmos-rl's defaults come from `cosmos_rl_defaults.json` beside this file (no cosmos_rl import here;
`skillbank schemas generate` regenerates it).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from skillbank.errors import InputError
from skillbank.specification import cosmos_keys
from skillbank.specification.keys import iter_fields
from skillbank.specification.overrides import get_dotted, set_dotted

DEFAULTS_FILE = Path(__file__).with_name("cosmos_rl_defaults.json")
FORMATS = ("auto", "skillbank", "cosmos-rl")

# cosmos-rl defaults of None that mean a value the skill spells out
NONE_MEANS = {"train.optm_decay_type": "none"}
# config keys that only cosmos-rl has, whose presence says "this is a cosmos-rl config"
COSMOS_MARKERS = ("train.compile", "train.timestamp", "train.resume", "policy.parallelism.n_init_replicas", "custom.dataset",
                  "custom.model_family", "train.train_policy.dataloader_drop_last", "validation.freq")


@dataclass
class FromCosmos:
    data: dict[str, Any]
    notes: list[str] = field(default_factory=list)
    defaults_kept: list[dict[str, Any]] = field(default_factory=list)  # {key, cosmos_rl, template}: where they differ


def _leaves(data: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in data.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            out.update(_leaves(value, f"{path}."))
        else:
            out[path] = value
    return out


def is_cosmos_config(data: dict[str, Any], path: str | Path, fmt: str = "auto") -> bool:
    """Read as cosmos-rl's config? --from-format decides; auto: a key only cosmos-rl has, a file
    named cosmos_config, or a TOML with a [train] table and no results_dir (skill specs have one)."""
    if fmt != "auto":
        return fmt == "cosmos-rl"
    name = Path(path).name
    leaves = _leaves(data)
    if any(k == m or k.startswith(m + ".") for k in leaves for m in COSMOS_MARKERS) or name == "cosmos_config":
        return True
    return Path(path).suffix.lower() == ".toml" and isinstance(data.get("train"), dict) and "results_dir" not in data


def _defaults() -> dict[str, Any]:
    return json.loads(DEFAULTS_FILE.read_text(encoding="utf-8"))


def from_cosmos(model: type[BaseModel], config: dict[str, Any], template: dict[str, Any], *, where: str) -> FromCosmos:
    """The spec dict (every key of the model filled), notes, and the kept cosmos-rl defaults that differ from the template."""
    policy_type = get_dotted(config, "train.train_policy.type")
    if policy_type not in (None, "sft"):
        raise InputError(f"this cosmos-rl config trains {policy_type!r}, not SFT", where=f"{where}: train.train_policy.type",
                         fix="spec --from reads SFT configs; write an rl spec with `skillbank spec --action rl`")
    snapshot = _defaults()
    cosmos = snapshot["sft"]
    leaves = _leaves(config)
    lora_on = isinstance(get_dotted(config, "policy.lora"), dict)
    data: dict[str, Any] = {}
    unknown: list[str] = []
    for key, value in leaves.items():
        if value is None or value == {}:
            continue  # cosmos-rl's null is its default behaviour: treated as left out (below); an empty [policy.lora] is lora_on
        target = cosmos_keys.spec_key(key)
        if target is None:
            unknown.append(key)
            continue
        set_dotted(data, target, value)
    out = FromCosmos(data)
    if get_dotted(config, "train.timestamp") and str(get_dotted(data, "train.output_dir", "")).rstrip("/").endswith("/" + str(config["train"]["timestamp"])):
        set_dotted(data, "train.output_dir", str(Path(data["train"]["output_dir"]).parent))  # cosmos-rl appended the run's timestamp
        out.notes.append(f"train.output_dir: the run folder's parent ({data['train']['output_dir']}); cosmos-rl adds a timestamped run folder under it")
    if lora_on:
        set_dotted(data, "policy.lora.enable", True)
    fills = []
    for key, info in iter_fields(model):
        if get_dotted(data, key, _UNSET) is not _UNSET:
            continue
        template_value = get_dotted(template, key)
        if _optional_section_unset(key, template, data):
            continue  # e.g. custom.val_dataset: null in the template and absent from the config
        if key.startswith("policy.lora.") and not lora_on:
            set_dotted(data, key, False if key == "policy.lora.enable" else template_value)  # no [policy.lora]: no LoRA
            continue
        if key not in cosmos:
            set_dotted(data, key, template_value)  # a key only the skill has
            continue
        value = cosmos[key]
        if value is None and key in NONE_MEANS:
            value = NONE_MEANS[key]
        if value is None and template_value is not None:
            fills.append(f"{key} (cosmos-rl leaves it unset; the skill's {template_value!r} is used)")
            set_dotted(data, key, template_value)
            continue
        set_dotted(data, key, value)
        if value != template_value and not (isinstance(value, list) and list(template_value or []) == value):
            out.defaults_kept.append({"key": key, "cosmos_rl": value, "template": template_value})
    if (get_dotted(data, "train.ckpt.save_freq_in_epoch") or 0) > 0 and get_dotted(data, "train.ckpt.save_freq") is not None:
        if get_dotted(config, "train.ckpt.save_freq") is not None:  # the config's own value; cosmos-rl's default is dropped unsaid
            out.notes.append(f"train.ckpt.save_freq {get_dotted(data, 'train.ckpt.save_freq')} is not carried: cosmos-rl ignores it while "
                             f"save_freq_in_epoch is {get_dotted(data, 'train.ckpt.save_freq_in_epoch')} (policy/worker/sft_worker.py)")
        out.defaults_kept = [d for d in out.defaults_kept if d["key"] != "train.ckpt.save_freq"]
        set_dotted(data, "train.ckpt.save_freq", None)
    vf = get_dotted(config, "validation.freq")
    if vf is not None:
        out.notes.append(f"validation.freq {vf} (steps) is not carried: the skill validates every validation.freq_in_epoch epochs "
                         f"({get_dotted(data, 'validation.freq_in_epoch')})")
    dropped = [k for k in unknown if k != "validation.freq"]
    if dropped:
        shown = ", ".join(dropped[:12]) + (f" and {len(dropped) - 12} more" if len(dropped) > 12 else "")
        out.notes.append(f"cosmos-rl-only keys not carried into the spec (skillbank writes its own when it launches): {shown}")
    if fills:
        out.notes.append("; ".join(fills))
    if out.defaults_kept:
        listed = ", ".join(f"{d['key']}={d['cosmos_rl']!r} (template {d['template']!r})" for d in out.defaults_kept)
        out.notes.append(f"read as a cosmos-rl {snapshot['cosmos_rl']} config: keys it does not set keep cosmos-rl's defaults, "
                         f"where the skill's template differs: {listed}; --set KEY=VALUE to take the template's")
    return out


_UNSET = object()


def _optional_section_unset(key: str, template: dict[str, Any], data: dict[str, Any]) -> bool:
    parts = key.split(".")
    for i in range(1, len(parts)):
        parent = ".".join(parts[:i])
        if get_dotted(template, parent, _UNSET) is None and get_dotted(data, parent, _UNSET) is _UNSET:
            return True
    return False
