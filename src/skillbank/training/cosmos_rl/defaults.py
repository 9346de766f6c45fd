"""cosmos-rl's own defaults for the keys of the train spec, snapshotted for `skillbank spec --from`.

`spec --from` a raw cosmos-rl config keeps cosmos-rl's default for every key the config leaves out
(that is what cosmos-rl would run), but `spec` is agent-facing and must not import cosmos_rl (6-8 s).
So the defaults are read here from cosmos-rl's own Config model, at the cosmos-rl key of each spec key
(skillbank.specification.cosmos_keys), and kept in `skillbank/specification/cosmos_rl_defaults.json`.
`skillbank schemas generate` regenerates it (in a child process, skillbank.generate.snapshots) and
`--check` compares it with the installed cosmos-rl.
"""

from __future__ import annotations

import json
from importlib import metadata
from typing import Any

from skillbank.specification import cosmos_keys
from skillbank.specification.overrides import get_dotted

_MISSING = object()
BUILT_WITH = ("train.output_dir", "policy.model_name_or_path")  # what the Config below is built with, not defaults


def read_defaults() -> dict[str, Any]:
    """{"cosmos_rl": version, "sft": {spec key: default}} for every train-spec key cosmos-rl has
    (LoRA keys from an empty [policy.lora] table: cosmos-rl has no LoRA unless the table exists)."""
    from skillbank.compat.cosmos_rl_import import import_quietly

    Config = import_quietly("cosmos_rl.policy.config").Config  # noqa: N806 - cosmos-rl's class
    config = Config.from_dict({"train": {"output_dir": "/unused", "train_policy": {"type": "sft"}}, "policy": {"model_name_or_path": "unused", "lora": {}}})
    dumped = config.model_dump(mode="json")
    out = {}
    for key in cosmos_keys.keys_of(cosmos_keys.SAME, cosmos_keys.WRITTEN):
        if key in BUILT_WITH:
            continue
        value = get_dotted(dumped, cosmos_keys.TRAIN_KEYS[key].cosmos, _MISSING)
        if value is not _MISSING:
            out[key] = value
    return {"cosmos_rl": metadata.version("cosmos-rl"), "sft": out}


def snapshot_text() -> str:
    """The file's text, as `skillbank schemas generate` writes it."""
    return json.dumps(read_defaults(), indent=2, sort_keys=True) + "\n"


CONFIG_PACKAGES = ("cosmos_rl", "cosmos_rl.policy", "cosmos_rl.utils")


def snapshot_text_alone() -> str:
    """snapshot_text in a process of its own (`schemas generate`'s child) that imports only cosmos-rl's config
    module and the two utils it reads (logging, modelscope): `import cosmos_rl.policy.config` otherwise runs
    cosmos_rl's package __init__, which imports torch, transformers and every model (~8 s of CPU; 0.3 s alone).
    The packages on its way are registered bare (their __path__, not their __init__), so this process must not
    import cosmos_rl otherwise: only the child calls it. The text is the same (tests/test_spec_from_cosmos.py)."""
    import importlib.util
    import sys
    import types

    for name in CONFIG_PACKAGES:
        if name not in sys.modules:
            spec = importlib.util.find_spec(name)
            if spec is None or not spec.submodule_search_locations:
                raise ModuleNotFoundError(name)
            package = types.ModuleType(name)
            package.__path__, package.__spec__, package.__package__ = list(spec.submodule_search_locations), spec, name
            sys.modules[name] = package
    return snapshot_text()
