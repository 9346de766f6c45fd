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

from skillbank.training.cosmos_rl.chats import LlavaChats, check_document, read_config  # noqa: E402,F401 (read_config: grpo_script's)
from skillbank.training.cosmos_rl.family import FAMILIES, ModelFamily  # noqa: E402


class LlavaChatDataset(LlavaChats, Dataset):
    """The trainer's dataset: LlavaChats' items (chats.py, torch-free, what --skillbank-check and
    `skillbank train --dry-run` print) as a torch Dataset: cosmos-rl splits a validation set off only those."""


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


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    custom = read_config(args.config).get("custom", {})
    if args.skillbank_check:
        print(json.dumps(check_document(custom)))
        return
    train, val = datasets(custom)
    from cosmos_rl.launcher.worker_entry import main as worker_main

    packer = packer_class(family(custom))
    worker_main(dataset=train, data_packer=packer(), val_dataset=val, val_data_packer=packer(), args=args)


if __name__ == "__main__":
    main()
