"""The dataset script cosmos-rl runs as its controller and as every policy rank.

    cosmos-rl --config run.toml --log-dir logs .../skillbank/training/cosmos_rl/script.py

It reads `custom` from the config cosmos-rl hands it (`--config`), serves each LLaVA record as an HF
chat, picks the data packer of the model family, and calls cosmos-rl's `worker_entry.main`. Our own
flag (`--skillbank-check`: print the first chat and exit) would make cosmos-rl's default parser exit,
so the script parses with that parser plus its flag and passes `args=` (with --skillbank-check it reads
--config itself, without cosmos-rl).
"""

from __future__ import annotations

import sys
from pathlib import Path

if __name__ == "__main__":
    # Run by path, this folder is sys.path[0]: its toml.py would shadow the `toml` package cosmos-rl imports.
    _HERE = Path(__file__).resolve().parent
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]

import importlib  # noqa: E402
import json  # noqa: E402
from collections.abc import Mapping, Sequence  # noqa: E402
from types import SimpleNamespace  # noqa: E402
from typing import Any  # noqa: E402

from torch.utils.data import Dataset  # noqa: E402

from skillbank.data.chat import build_messages  # noqa: E402
from skillbank.data.records import load_records  # noqa: E402
from skillbank.training.cosmos_rl.family import FAMILIES, ModelFamily  # noqa: E402


class LlavaChatDataset(Dataset):
    """LLaVA records served as chats (skillbank.data.chat, the mapping both backends share).
    A torch Dataset: cosmos-rl splits a validation set off only those."""

    def __init__(self, records: Sequence[Mapping[str, Any]], *, media_path: str, system_prompt: str, vision: Mapping[str, Any]):
        self.records = records
        self.media_path = media_path
        self.system_prompt = system_prompt
        self.vision = dict(vision)

    @classmethod
    def from_custom(cls, custom: Mapping[str, Any], split: str = "train_dataset") -> LlavaChatDataset:
        """From the TOML's `custom` table; split is "train_dataset" or "val_dataset"."""
        paths = custom[split]
        return cls(
            load_records(paths["annotation_path"]),
            media_path=paths.get("media_path", ""),
            system_prompt=custom.get("system_prompt", ""),
            vision=custom.get("vision", {}),
        )

    def __len__(self) -> int:
        return len(self.records)

    def __getitem__(self, idx: int) -> list[dict[str, Any]]:
        # vision: fps | nframes, total_pixels, max_pixels as the TOML's custom.vision has them
        return build_messages(self.records[idx], media_path=self.media_path, system_prompt=self.system_prompt, **self.vision)


def datasets(custom: Mapping[str, Any]) -> tuple[LlavaChatDataset, LlavaChatDataset | None]:
    """Train and (when the TOML names one) validation set; without one cosmos-rl splits train."""
    val = LlavaChatDataset.from_custom(custom, "val_dataset") if custom.get("val_dataset") else None
    return LlavaChatDataset.from_custom(custom, "train_dataset"), val


def family(custom: Mapping[str, Any]) -> ModelFamily:
    return FAMILIES[custom["model_family"]]


def packer_class(fam: ModelFamily) -> type:
    """cosmos-rl's data packer class for the family (imports cosmos_rl: only inside its processes)."""
    return getattr(importlib.import_module("cosmos_rl.dispatcher.data.packer"), fam.packer)


CHECK_FLAG = "--skillbank-check"


def parse_args(argv: Sequence[str] | None = None, *, check: str = "print the first chat as JSON and exit") -> Any:
    """cosmos-rl's worker options (--config, --port, --redis-port, ...: its own parser) plus ours (`check`:
    what --skillbank-check prints; the GRPO script shares this). With --skillbank-check only --config is
    read (no cosmos-rl needed: its packer package takes seconds to import)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if CHECK_FLAG in argv:
        config = next((a.split("=", 1)[1] for a in argv if a.startswith("--config=")), None)
        if config is None and "--config" in argv[:-1]:
            config = argv[argv.index("--config") + 1]
        return SimpleNamespace(config=config, skillbank_check=True)
    from cosmos_rl.dispatcher.data.packer.base import worker_entry_parser

    parser = worker_entry_parser()
    parser.add_argument(CHECK_FLAG, action="store_true", help=check)
    return parser.parse_args(argv)


def read_config(config_path: str) -> dict[str, Any]:
    import toml  # what cosmos-rl itself reads its config with

    with open(config_path, encoding="utf-8") as f:
        return toml.load(f)


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    custom = read_config(args.config).get("custom", {})
    train, val = datasets(custom)
    if args.skillbank_check:
        print(json.dumps({"family": custom["model_family"], "train": len(train), "val": len(val) if val else None, "first": train[0]}))
        return
    from cosmos_rl.launcher.worker_entry import main as worker_main

    packer = packer_class(family(custom))
    worker_main(dataset=train, data_packer=packer(), val_dataset=val, val_data_packer=packer(), args=args)


if __name__ == "__main__":
    main()
