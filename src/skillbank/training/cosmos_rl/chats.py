"""The chats cosmos-rl's SFT trainer is handed, without torch: the dataset script's torch Dataset
(script.LlavaChatDataset) takes its items from LlavaChats, so what `--skillbank-check` and
`skillbank train --dry-run` print is the trainer's own first item, not a copy of its rule.

A chat item: skillbank.data.chat.build_messages of the record with the TOML's custom.system_prompt and
custom.vision (fps | nframes, total_pixels, max_pixels, as qwen_vl_utils reads them in the packer):
system, user [video entry, question], assistant, and every further turn.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from skillbank.data.chat import build_messages
from skillbank.data.records import load_records
from skillbank.errors import InputError

CHECK_COMMAND = "python -m skillbank.training.cosmos_rl.script --config {toml} --skillbank-check"


class LlavaChats:
    """LLaVA records served as chats (skillbank.data.chat, the mapping both backends share)."""

    def __init__(self, records: Sequence[Mapping[str, Any]], *, media_path: str, system_prompt: str, vision: Mapping[str, Any]):
        self.records = records
        self.media_path = media_path
        self.system_prompt = system_prompt
        self.vision = dict(vision)

    @classmethod
    def from_custom(cls, custom: Mapping[str, Any], split: str = "train_dataset") -> Any:
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


def read_config(config_path: str) -> dict[str, Any]:
    import toml  # what cosmos-rl itself reads its config with

    with open(config_path, encoding="utf-8") as f:
        return toml.load(f)


def check_document(custom: Mapping[str, Any]) -> dict[str, Any]:
    """What `script.py --skillbank-check` prints: the model family, the train and validation record
    counts and the first training chat, exactly the trainer's first item."""
    train = LlavaChats.from_custom(custom, "train_dataset")
    val = LlavaChats.from_custom(custom, "val_dataset") if custom.get("val_dataset") else None
    return {"family": custom["model_family"], "train": len(train), "val": len(val) if val is not None else None, "first": train[0]}


def first_record(annotation_path: str) -> list[dict[str, Any]]:
    """The annotations' first record (a list of one; none when the array is empty), streamed: a dry run
    does not read a 1M-record file whole (skillbank.data.jsonstream)."""
    from skillbank.data.jsonstream import ArrayFormatError, iter_batches

    try:
        return next((batch[:1] for batch in iter_batches(annotation_path) if batch), [])
    except ArrayFormatError as exc:
        raise InputError(f"annotation file is not a JSON array: {exc}", where=annotation_path, fix="preflight names the record") from None


def dry_run_lines(toml_path: str | Path) -> list[str]:
    """The first training chat of the TOML a dry run wrote, as the trainer gets it (LlavaChats' first item,
    the first record only), and the command that prints it on the node: `skillbank train --dry-run`."""
    command = CHECK_COMMAND.format(toml=toml_path)
    try:
        custom = read_config(str(toml_path)).get("custom", {})
        paths = custom["train_dataset"]
        chats = LlavaChats(first_record(paths["annotation_path"]), media_path=paths.get("media_path", ""),
                           system_prompt=custom.get("system_prompt", ""), vision=custom.get("vision", {}))
        first = json.dumps(chats[0], ensure_ascii=False) if len(chats) else "(no records)"
    except (InputError, OSError, KeyError) as exc:  # a --path-map TOML names the node's files
        reason = exc.message if isinstance(exc, InputError) else f"{type(exc).__name__}: {exc}"
        return [f"first chat : not read here ({reason}); on the node: {command}"]
    return [f"first chat : {first}", f"             (the trainer's first item; with the record counts: {command})"]
