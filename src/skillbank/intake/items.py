"""The one record shape every reader produces, and what a reader reports it could not use.

A reader turns one kind of source into `Item`s (a clip on disk + LLaVA conversations + the source's
other keys) and `Bad`s (file, id, reason). Everything after reading (probing, the split, placing the
media, writing DIR) is shared and never asks which reader ran.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# Keys the import writes on every record; a source key of the same name is replaced.
RECORD_KEYS = ("id", "video", "video_fps", "duration", "num_frames", "width", "height", "conversations")
VIDEO_SUFFIXES = frozenset({".mp4", ".mov", ".mkv", ".avi", ".webm", ".m4v", ".mpg", ".mpeg", ".ts", ".mts", ".flv", ".wmv"})
VAL_NAMES = {"validation": "val", "valid": "val", "dev": "val", "eval": "val", "val": "val"}


@dataclass
class Item:
    """One question about one clip, as a record before probing."""

    id: str
    where: str  # the source file (and row / index) it came from, for messages
    video: str  # an absolute path (a str: 10,000s of them are hashed and compared): the source's clip, or a file this import wrote
    clip: str  # the clip's identity for grouping and hashing: stable across machines (relative path or sha256)
    conversations: list[dict[str, Any]]
    extra: dict[str, Any] = field(default_factory=dict)  # the source's other keys, kept on the record
    split: str | None = None  # the source's own split, when it has them
    written: bool = False  # video is a file this import wrote under DIR (moved into place, never linked)

    @property
    def family(self) -> str | None:
        value = self.extra.get("family")
        return str(value) if isinstance(value, (str, int)) and value != "" else None


@dataclass(frozen=True)
class Bad:
    """An input the import cannot use: where it is, its id (when it has one) and why."""

    where: str
    id: str
    reason: str

    def to_dict(self) -> dict[str, str]:
        return {"where": self.where, "id": self.id, "reason": self.reason}

    def line(self) -> str:
        return f"{self.where}" + (f" [{self.id}]" if self.id else "") + f": {self.reason}"


@dataclass
class Read:
    """What a reader returns."""

    reader: str
    items: list[Item] = field(default_factory=list)
    bad: list[Bad] = field(default_factory=list)
    fields: dict[str, str] = field(default_factory=dict)  # {"question": key, "answer": key, "video": key} it used
    root: Path | None = None  # the folder the source's clips sit under (linked once per split, not clip by clip)
    notes: dict[str, Any] = field(default_factory=dict)  # reader-specific counts for import.json
    on_clip: Callable[[str], None] | None = None  # told each item's clip as it is read (probing starts then)

    def add(self, item: Item) -> None:
        self.items.append(item)
        if self.on_clip is not None:
            self.on_clip(item.video)


def split_name(name: str | None) -> str | None:
    """A source split's folder name: validation / valid / dev / eval -> val (what `spec --dataset-root` reads)."""
    if name is None:
        return None
    return VAL_NAMES.get(name.lower(), name)


def qa_conversations(question: str, answer: str) -> list[dict[str, str]]:
    """A human turn asking about the video, then the answer (the <video> tag added when missing)."""
    value = question if "<video>" in question else f"<video>\n{question}"
    return [{"from": "human", "value": value}, {"from": "gpt", "value": answer}]


def is_video(name: str | Path) -> bool:
    suffix = str(name).rpartition(".")[2].lower()
    return f".{suffix}" in VIDEO_SUFFIXES
