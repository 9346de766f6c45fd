"""Reader: a folder of clips with one label file per clip (the Cosmos-Reason2 AV layout).

`videos/seq001.camera_front_wide_120fov.mp4` and `metas/seq001.label.json` anywhere under SOURCE meet
on the clip id, the file name up to its first dot. A label file holds a JSON object or a list of
objects (several questions on one clip); each object becomes a record, its question and answer under
common key names (or --question-key / --answer-key) and every other key kept on the record.
"""

from __future__ import annotations

import fnmatch
import json
import os
from pathlib import Path
from typing import Any

from skillbank.intake.fields import QAKeys
from skillbank.intake.items import Bad, Item, Read, is_video

LABEL_SUFFIX = ".json"


def clip_id(name: str) -> str:
    """`seq001.front_wide.mp4` -> `seq001`."""
    return name.split(".", 1)[0]


def _walk(source: Path, clip_glob: str) -> tuple[dict[str, list[Path]], list[Path]]:
    """{clip id: clip files}, label files; sorted so every run reads the same order."""
    clips: dict[str, list[Path]] = {}
    labels: list[Path] = []
    for folder, dirs, files in os.walk(source, followlinks=True):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(files):
            path = Path(folder) / name
            if name.startswith("."):
                continue
            if is_video(path):
                if fnmatch.fnmatch(name, clip_glob):
                    clips.setdefault(clip_id(name), []).append(path)
            elif name.lower().endswith(LABEL_SUFFIX):
                labels.append(path)
    return clips, labels


def _objects(path: Path) -> list[dict[str, Any]] | str:
    """The label file's objects, or why it is malformed."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        return f"malformed label file: {exc}"
    objects = data if isinstance(data, list) else [data]
    if not objects or not all(isinstance(o, dict) for o in objects):
        return "malformed label file: not a JSON object or a list of objects"
    return objects


def read_clips(source: Path, *, question_key: str | None = None, answer_key: str | None = None, clip_glob: str = "*", **_: Any) -> Read:
    clips, labels = _walk(source, clip_glob)
    out = Read("clips", root=Path(os.path.abspath(source)))
    rel = lambda p: p.relative_to(source).as_posix()  # noqa: E731
    rows: list[tuple[Path, str, int, int, dict[str, Any]]] = []  # (label file, clip id, index, count, object)
    for label in labels:
        objects = _objects(label)
        if isinstance(objects, str):
            out.bad.append(Bad(rel(label), clip_id(label.name), objects))
            continue
        rows += [(label, clip_id(label.name), i, len(objects), o) for i, o in enumerate(objects)]
    keys = QAKeys.of((k for *_, o in rows for k in o), question_key, answer_key, where=f"{source} (label files)")
    out.fields = keys.used()
    labelled = set()
    for label, cid, index, count, obj in rows:
        where = rel(label) + (f"#{index}" if count > 1 else "")
        rid = str(obj["id"]) if isinstance(obj.get("id"), (str, int)) and not isinstance(obj.get("id"), bool) else (cid if count == 1 else f"{cid}-{index}")
        files = clips.get(cid, [])
        labelled.add(cid)
        if not files:
            out.bad.append(Bad(where, rid, f"missing clip: no video file named {cid}.* under {source} (glob {clip_glob!r})"))
            continue
        if len(files) > 1:
            names = ", ".join(rel(f) for f in files)
            out.bad.append(Bad(where, rid, f"clip id {cid} matches {len(files)} files ({names}); pass --clip-glob to pick one camera"))
            continue
        conversations = keys.conversations(obj)
        if isinstance(conversations, str):
            out.bad.append(Bad(where, rid, conversations))
            continue
        video = files[0]
        out.items.append(Item(rid, where, Path(os.path.abspath(video)), rel(video), conversations, keys.extra(obj, "id")))
    out.notes = {"label_files": len(labels), "clips_found": sum(map(len, clips.values())),
                 "clips_without_labels": sorted(c for c in clips if c not in labelled)[:50], "clips_without_labels_count": len(set(clips) - labelled)}
    return out
