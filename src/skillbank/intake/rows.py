"""Rows with a video column (Hugging Face datasets, CSV, JSONL) -> items: the part those readers share.

A video cell is a path (relative to the media root, or absolute) or the `datasets` Video feature's
`{"bytes", "path"}` struct; embedded bytes are written once (by content) under DIR's temp folder and
become clips like any other.
"""

from __future__ import annotations

import datetime
import decimal
import hashlib
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from skillbank.errors import InputError
from skillbank.intake.fields import VIDEO_KEYS, QAKeys, choose
from skillbank.intake.items import Bad, Item, Read

ID_KEYS = ("id", "video_id", "sample_id", "uid")


class Spill:
    """Embedded clip bytes -> files under `folder` (one per distinct content), named as the dataset named them."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.written: dict[str, Path] = {}

    def write(self, data: bytes, name: str) -> tuple[Path, str]:
        digest = hashlib.sha256(data).hexdigest()
        if digest not in self.written:
            target = self.folder / digest[:16] / (Path(name).name or f"{digest[:16]}.mp4")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
            self.written[digest] = target
        return self.written[digest], f"sha256:{digest}"


def jsonable(value: Any) -> tuple[Any, bool]:
    """(value as JSON can hold it, True) or (None, False) for binary content (never put on a record)."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return None, False
    if isinstance(value, dict):
        pairs = {k: jsonable(v) for k, v in value.items()}
        return ({k: v for k, (v, ok) in pairs.items() if ok}, True) if all(ok for _, ok in pairs.values()) else (None, False)
    if isinstance(value, (list, tuple)):
        parts = [jsonable(v) for v in value]
        return ([v for v, _ in parts], True) if all(ok for _, ok in parts) else (None, False)
    if isinstance(value, float) and value != value:
        return None, True  # NaN (an empty CSV / parquet cell) -> null
    if isinstance(value, (datetime.date, datetime.time, datetime.datetime, decimal.Decimal)):
        return str(value), True
    return value, True


class RowReader:
    """Turns a source's rows into items, with its fields decided once from its column names."""

    def __init__(self, out: Read, columns: Iterable[str], *, where: str, media_root: Path, spill: Spill | None,
                 question_key: str | None, answer_key: str | None, video_key: str | None) -> None:
        columns = list(columns)
        self.out, self.media_root, self.spill = out, media_root, spill
        self.keys = QAKeys.of(columns, question_key, answer_key, where=where)
        self.video = choose(columns, VIDEO_KEYS, video_key, what="video", flag="--video-key", where=where)
        if self.video is None:
            raise InputError(f"no video column among {', '.join(columns) or '(none)'}", where=where, fix=f"pass --video-key COLUMN (common names: {', '.join(VIDEO_KEYS)})")
        self.id_key = next((k for k in columns if k.lower() in ID_KEYS and k not in (self.video, self.keys.question, self.keys.answer)), None)
        out.fields = {**self.keys.used(), "video": self.video, **({"id": self.id_key} if self.id_key else {})}
        self.dropped: set[str] = set()

    def add(self, row: dict[str, Any], where: str, default_id: str, split: str | None = None) -> None:
        raw_id = row.get(self.id_key) if self.id_key else None
        rid = str(raw_id) if isinstance(raw_id, (str, int)) and not isinstance(raw_id, bool) and str(raw_id) else default_id
        clip = self._clip(row.get(self.video), rid)
        if isinstance(clip, str):
            self.out.bad.append(Bad(where, rid, clip))
            return
        conversations = self.keys.conversations(row)
        if isinstance(conversations, str):
            self.out.bad.append(Bad(where, rid, conversations))
            return
        extra = {}
        for key, value in self.keys.extra(row, self.video, self.id_key).items():
            value, ok = jsonable(value)
            if ok:
                extra[key] = value
            else:
                self.dropped.add(key)
        video, key, written = clip
        self.out.add(Item(rid, where, video, key, conversations, extra, split, written))

    def _clip(self, cell: Any, rid: str) -> tuple[str, str, bool] | str:
        if isinstance(cell, dict):
            data, name = cell.get("bytes"), cell.get("path")
            if data:
                if self.spill is None:
                    return "the video cell holds bytes, which this source cannot carry"
                path, key = self.spill.write(bytes(data), str(name or f"{rid}.mp4"))
                return str(path), key, True
            cell = name
        if cell is not None and not isinstance(cell, str):
            return f"no video: column {self.video!r} holds a {type(cell).__name__}, not a path or a {{bytes, path}} struct"
        if not cell or not cell.strip():
            return f"no video: column {self.video!r} is empty"
        path = Path(cell).expanduser()
        full = path if path.is_absolute() else self.media_root / path
        if not full.is_file():
            return f"missing clip: {full} does not exist"
        key = cell if not path.is_absolute() else os.path.abspath(full)
        return os.path.abspath(full), key, False

    def finish(self) -> None:
        if self.dropped:
            self.out.notes["dropped_binary_columns"] = sorted(self.dropped)
