"""DIR's layout: one folder per split with annotations.json and videos/, every path relative to it.

`spec --dataset-root DIR` reads DIR/train and DIR/val, and an empty media path means the annotation
file's folder, so each split's clips sit under `<split>/videos/`: a symlink to the source's clip
(default) or a copy (--copy-media). A clip this import wrote (embedded bytes) is moved into the first
split that uses it. Names are the clips' own file names; two different clips with one name get -1, -2.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

from skillbank.intake.items import Item

VIDEOS = "videos"


def _unique(name: str, taken: set[str]) -> str:
    stem, dot, suffix = name.partition(".")
    candidate, n = name, 0
    while candidate in taken:
        n += 1
        candidate = f"{stem}-{n}{dot}{suffix}"
    taken.add(candidate)
    return candidate


def place_split(items: list[Item], folder: Path, *, copy: bool, moved: dict[Path, Path]) -> dict[Path, str]:
    """Put each distinct clip of a split under folder/videos; {clip path: path relative to folder}."""
    videos = folder / VIDEOS
    videos.mkdir(parents=True, exist_ok=True)
    names: dict[Path, str] = {}
    taken: set[str] = set()
    for item in items:
        if item.video in names:
            continue
        name = _unique(item.video.name, taken)
        target = videos / name
        if item.written and item.video not in moved:
            os.replace(item.video, target)
            moved[item.video] = target
        elif item.written:
            first = moved[item.video]
            shutil.copy2(first, target) if copy else os.symlink(os.path.relpath(first, videos), target)
        elif copy:
            shutil.copy2(item.video, target)
        else:
            os.symlink(item.video, target)
        names[item.video] = f"{VIDEOS}/{name}"
    return names


def record(item: Item, video: str, probed: dict[str, Any]) -> dict[str, Any]:
    """The LLaVA record: id, video, the probed fields, conversations, then the source's other keys."""
    return {"id": item.id, "video": video, **probed, "conversations": item.conversations, **item.extra}


def write_annotations(path: Path, records: list[dict[str, Any]]) -> None:
    """One JSON array, a record per line (diffable, and streamable by preflight)."""
    with path.open("w", encoding="utf-8") as handle:
        handle.write("[\n")
        for i, rec in enumerate(records):
            handle.write((",\n" if i else "") + json.dumps(rec, ensure_ascii=False, allow_nan=False))
        handle.write("\n]\n")
