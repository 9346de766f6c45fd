"""cosmos-rl's own defaults for the keys of the train spec, snapshotted for `skillbank spec --from`.

`spec --from` a raw cosmos-rl config keeps cosmos-rl's default for every key the config leaves out
(that is what cosmos-rl would run), but `spec` is agent-facing and must not import cosmos_rl (6-8 s).
So the defaults are read here from cosmos-rl's own Config model and kept in
`skillbank/specification/cosmos_rl_defaults.json`; a test compares the file with the installed cosmos-rl.
Regenerate after a cosmos-rl upgrade:  python -m skillbank.training.cosmos_rl.defaults
"""

from __future__ import annotations

import json
from importlib import metadata
from typing import Any

from skillbank import atomic
from skillbank.specification.cosmos_config import DEFAULTS_FILE
from skillbank.specification.keys import leaf_keys
from skillbank.specification.overrides import get_dotted
from skillbank.specification.train import TrainSpec

_MISSING = object()


def read_defaults() -> dict[str, Any]:
    """{"cosmos_rl": version, "sft": {dotted key: default}} for every train-spec key cosmos-rl has
    (LoRA keys from an empty [policy.lora] table: cosmos-rl has no LoRA unless the table exists)."""
    from skillbank.compat.cosmos_rl_import import import_quietly

    Config = import_quietly("cosmos_rl.policy.config").Config  # noqa: N806 - cosmos-rl's class
    config = Config.from_dict({"train": {"output_dir": "/unused", "train_policy": {"type": "sft"}}, "policy": {"model_name_or_path": "unused", "lora": {}}})
    dumped = config.model_dump(mode="json")
    out = {}
    for key in leaf_keys(TrainSpec):
        if key in ("train.output_dir", "policy.model_name_or_path"):
            continue  # what the Config was built with, not a default
        value = get_dotted(dumped, key, _MISSING)
        if value is not _MISSING:
            out[key] = value
    return {"cosmos_rl": metadata.version("cosmos-rl"), "sft": out}


def main() -> None:
    atomic.write_text(DEFAULTS_FILE, json.dumps(read_defaults(), indent=2, sort_keys=True) + "\n")
    print(f"wrote {DEFAULTS_FILE}")


if __name__ == "__main__":
    main()
