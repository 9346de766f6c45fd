"""Reader: a folder of clips with one label file per clip (the Cosmos-Reason2 AV layout).

`videos/seq001.camera_front_wide_120fov.mp4` and `metas/seq001.label.json` anywhere under SOURCE meet
on the clip id, the file name up to its first dot. A label file holds a JSON object or a list of
objects (several questions on one clip); each object becomes a record, its question and answer under
common key names (or --question-key / --answer-key) and every other key kept on the record. A .json
file none of whose objects has the question or the answer key (dataset_info.json, seq001.meta.json)
is not a label file: it is listed in the report, not refused.
"""

from __future__ import annotations

import fnmatch
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from skillbank.intake.fields import QAKeys
from skillbank.intake.items import Bad, Item, Read, is_video

LABEL_SUFFIX = ".json"


def clip_id(name: str) -> str:
    """`seq001.front_wide.mp4` -> `seq001`."""
    return name.split(".", 1)[0]


def _walk(source: str, clip_glob: str) -> tuple[dict[str, list[str]], list[str]]:
    """{clip id: clip files}, label files, as paths relative to source; sorted so every run reads the
    same order. Plain strings and os.scandir: a pathlib object per file costs more than the walk."""
    clips: dict[str, list[str]] = {}
    labels: list[str] = []
    pending = [""]
    match_all = clip_glob == "*"
    while pending:
        rel = pending.pop()
        with os.scandir(os.path.join(source, rel) if rel else source) as entries:
            found = sorted((e.name, e.is_dir()) for e in entries if not e.name.startswith("."))
        for name, is_dir in reversed(found):
            path = f"{rel}/{name}" if rel else name
            if is_dir:
                pending.append(path)
            elif is_video(name):
                if match_all or fnmatch.fnmatch(name, clip_glob):
                    clips.setdefault(clip_id(name), []).append(path)
            elif name.lower().endswith(LABEL_SUFFIX):
                labels.append(path)
    for files in clips.values():
        files.sort()
    return clips, sorted(labels)


def _objects(path: str) -> list[dict[str, Any]] | str:
    """The label file's objects, or why it is malformed."""
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        return f"malformed label file: {exc}"
    objects = data if isinstance(data, list) else [data]
    if not objects or not all(isinstance(o, dict) for o in objects):
        return "malformed label file: not a JSON object or a list of objects"
    return objects


def _record_id(obj: dict[str, Any], cid: str, index: int, count: int) -> str:
    """The label's own id when it has one, else the clip id (-N for each question of a list)."""
    own = obj.get("id")
    if isinstance(own, (str, int)) and not isinstance(own, bool) and str(own):
        return str(own)
    return cid if count == 1 else f"{cid}-{index}"


def read_clips(source: Path, *, question_key: str | None = None, answer_key: str | None = None, clip_glob: str = "*",
               on_clip: Callable[[str], None] | None = None, **_: Any) -> Read:
    root = os.path.abspath(source)
    clips, labels = _walk(root, clip_glob)
    out = Read("clips", root=Path(root), on_clip=on_clip)
    if on_clip is not None:  # the clips a label file names by its own name: probed while the labels are parsed
        for cid in dict.fromkeys(clip_id(label.rpartition("/")[2]) for label in labels):
            if len(clips.get(cid, ())) == 1:
                on_clip(os.path.join(root, clips[cid][0]))
    rows: list[tuple[str, str, int, int, dict[str, Any]]] = []  # (label file, clip id, index, count, object)
    for label in labels:
        cid = clip_id(label.rpartition("/")[2])
        objects = _objects(os.path.join(root, label))
        if isinstance(objects, str):
            out.bad.append(Bad(label, cid, objects))
            continue
        rows += [(label, cid, i, len(objects), o) for i, o in enumerate(objects)]
    keys = QAKeys.of({k for *_, o in rows for k in o}, question_key, answer_key, where=f"{source} (label files)")
    out.fields = keys.used()
    labelled = set()
    asks = {label for label, *_, obj in rows if keys.names_any(obj)}
    ignored = sorted({label for label, *_ in rows if label not in asks}) if keys.question and keys.answer else []
    for label, cid, index, count, obj in rows:
        if label in ignored:
            continue  # a .json that asks nothing (dataset_info.json, seq001.meta.json): not a label file
        where = label + (f"#{index}" if count > 1 else "")
        rid = _record_id(obj, cid, index, count)
        files = clips.get(cid, [])
        labelled.add(cid)
        if not files:
            out.bad.append(Bad(where, rid, f"missing clip: no video file named {cid}.* under {source} (glob {clip_glob!r})"))
            continue
        if len(files) > 1:
            out.bad.append(Bad(where, rid, f"clip id {cid} matches {len(files)} files ({', '.join(files)}); pass --clip-glob to pick one camera"))
            continue
        conversations = keys.conversations(obj)
        if isinstance(conversations, str):
            out.bad.append(Bad(where, rid, conversations))
            continue
        out.add(Item(rid, where, os.path.join(root, files[0]), files[0], conversations, keys.extra(obj, "id")))
    unlabelled = sorted(set(clips) - labelled)
    out.notes = {"label_files": len(labels), "clips_found": sum(map(len, clips.values())),
                 "clips_without_labels": len(unlabelled), "clips_without_labels_first": unlabelled[:20],
                 "ignored_json_files": ignored[:20]}
    return out
