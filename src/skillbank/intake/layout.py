"""DIR's layout: one folder per split with annotations.json, every clip reachable from that folder.

`spec --dataset-root DIR` reads DIR/train and DIR/val, and an empty media path means the annotation
file's folder, so each split folder reaches its clips itself:
- by default, one symlink per split, `<split>/source` -> the folder the source's clips sit under
  (records say `source/videos/seq001.mp4`): one link, not one per clip (10,000 symlinks cost more
  than probing 10,000 clips on a busy disk); a clip outside that folder gets its own link in videos/;
- with --copy-media, a copy of each clip the split uses in `<split>/videos/`;
- a clip this import wrote (embedded bytes) is moved into the first split's videos/ that uses it
  (linked or copied from there for another split).
Copied and written clips keep their file names; two different clips with one name get -1, -2.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

from skillbank.intake.items import Item

VIDEOS = "videos"
SOURCE_LINK = "source"


def _unique(name: str, taken: set[str]) -> str:
    stem, dot, suffix = name.partition(".")
    candidate, n = name, 0
    while candidate in taken:
        n += 1
        candidate = f"{stem}-{n}{dot}{suffix}"
    taken.add(candidate)
    return candidate


def place_split(items: list[Item], folder: Path, *, root: Path | None, copy: bool, moved: dict[str, Path]) -> dict[str, str]:
    """Make each distinct clip of a split reachable from folder; {clip path: path relative to folder}."""
    videos = folder / VIDEOS
    inside = f"{root}{os.sep}" if root is not None and not copy else None
    names: dict[str, str] = {}
    taken: set[str] = set()
    for item in items:
        if item.video in names:
            continue
        text = item.video
        if inside and not item.written and text.startswith(inside):
            if not (folder / SOURCE_LINK).is_symlink():
                folder.mkdir(parents=True, exist_ok=True)
                os.symlink(root, folder / SOURCE_LINK, target_is_directory=True)
            names[item.video] = f"{SOURCE_LINK}/{text[len(inside):].replace(os.sep, '/')}"
            continue
        videos.mkdir(parents=True, exist_ok=True)
        name = _unique(os.path.basename(item.video), taken)
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
    """The LLaVA record: id, video, the probed fields, conversations, then the source's other keys (a
    source key of one of those names, say a label's own `video` or `video_fps`, gives way)."""
    out = {"id": item.id, "video": video, **probed, "conversations": item.conversations}
    for key, value in item.extra.items():
        out.setdefault(key, value)
    return out


def write_annotations(path: Path, records: list[dict[str, Any]]) -> None:
    """One JSON array, a record per line (diffable, and streamable by preflight)."""
    with path.open("w", encoding="utf-8") as handle:
        handle.write("[\n")
        for i, rec in enumerate(records):
            handle.write((",\n" if i else "") + json.dumps(rec, ensure_ascii=False, allow_nan=False))
        handle.write("\n]\n")
