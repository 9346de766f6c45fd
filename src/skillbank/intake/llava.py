"""Reader: an existing LLaVA annotations file (a JSON array), to re-probe and re-split.

Each record keeps its conversations (a system turn included) and its other keys; its clip metadata is
probed again from the file, and its old split is forgotten. Relative `video` paths resolve against
the file's folder (or --media-root), as `skillbank spec` resolves an empty media path.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from skillbank.errors import InputError
from skillbank.intake.items import RECORD_KEYS, Bad, Item, Read


def looks_like_llava(path: Path) -> bool:
    """A .json file whose text starts a JSON array of objects with a conversations list."""
    try:
        with path.open(encoding="utf-8") as handle:
            head = handle.read(65536)
    except (OSError, UnicodeDecodeError):
        return False
    return head.lstrip().startswith("[") and '"conversations"' in head


def read_llava(source: Path, *, media_root: Path | None = None, on_clip: Callable[[str], None] | None = None, **_: Any) -> Read:
    try:
        data = json.loads(source.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise InputError(f"not a readable JSON file: {exc}", where=str(source), fix="pass a LLaVA annotations.json (a JSON array)") from None
    if not isinstance(data, list):
        raise InputError("a LLaVA annotations file is a JSON array of records", where=str(source), fix="pass the annotations.json itself")
    root = media_root or source.parent
    out = Read("llava", fields={"question": "conversations", "answer": "conversations", "video": "video"}, root=Path(os.path.abspath(root)), on_clip=on_clip)
    for index, record in enumerate(data):
        where = f"{source.name}#{index}"
        if not isinstance(record, dict):
            out.bad.append(Bad(where, "", "the record is not a JSON object"))
            continue
        rid = str(record.get("id", f"{index:06d}"))
        conversations, video = record.get("conversations"), record.get("video")
        if not isinstance(conversations, list) or len(conversations) < 2 or not all(isinstance(t, dict) for t in conversations):
            out.bad.append(Bad(where, rid, "no question and answer: conversations is not a list of two or more turns"))
            continue
        if not isinstance(video, str) or not video:
            out.bad.append(Bad(where, rid, "no video: the record has no video path"))
            continue
        full = Path(video) if os.path.isabs(video) else root / video
        if not full.is_file():
            out.bad.append(Bad(where, rid, f"missing clip: {full} does not exist"))
            continue
        extra = {k: v for k, v in record.items() if k not in RECORD_KEYS and k != "frames"}
        out.add(Item(rid, where, os.path.abspath(full), video, conversations, extra))
    return out
