"""The loop's inputs, read once: the config's sets, the base train spec and the evaluate config,
and the disjointness rule (the frozen benchmark shares no id and no media file content with the
pool, the proxy set or the base training set); and which pool and proxy records are already
training items (`training_items`: a video with a training record's content, asked that record's
question), counted by `deft init`, the dry run and the stop rule."""

from __future__ import annotations

import os
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from skillbank.data import chat
from skillbank.data.media import media_root
from skillbank.data.records import load_records
from skillbank.errors import InputError
from skillbank.hashing import sha256_many

SHOWN = 5
SETS = ("pool", "proxy", "benchmark")


@dataclass
class RecordSet:
    role: str
    annotation_path: str
    media_dir: str  # resolved: the annotation file's folder when the config leaves it empty
    records: list[dict[str, Any]] = field(default_factory=list)

    @property
    def ids(self) -> list[str]:
        return [str(r.get("id", "")) for r in self.records]

    def video(self, record: dict[str, Any]) -> str:
        return os.path.abspath(chat.video_path(record, self.media_dir))


def load_set(role: str, annotation_path: str, media_dir: str) -> RecordSet:
    return RecordSet(role, annotation_path, media_root(media_dir, annotation_path), load_records(annotation_path))


class ContentIndex:
    """The media files of a protected set by content: other files are hashed only when their size
    matches one of them, so checking a pool of millions costs a stat per file, not a read. Hashes come
    from skillbank.hashing.sha256_many: cached by path, size and mtime, so a second check reads nothing."""

    def __init__(self, paths: list[str]) -> None:
        present = [p for p in dict.fromkeys(paths) if os.path.isfile(p)]
        self.digest_of: dict[str, str] = sha256_many(present)  # protected path -> sha256
        self.by_size: dict[int, set[str]] = defaultdict(set)
        self.paths_of: dict[str, list[str]] = defaultdict(list)  # sha256 -> protected paths with it
        for path, digest in self.digest_of.items():
            self.by_size[os.path.getsize(path)].add(digest)
            self.paths_of[digest].append(path)

    def digests(self, paths: list[str]) -> dict[str, str]:
        """{path: sha256} of the given files whose content is a protected file's (the others left out)."""
        candidates = []
        for path in dict.fromkeys(paths):
            try:
                if os.path.getsize(path) in self.by_size:
                    candidates.append(path)
            except OSError:
                continue
        return {p: d for p, d in sha256_many(candidates).items() if d in self.by_size[os.path.getsize(p)]}

    def matches(self, path: str) -> bool:
        return path in self.digests([path])


@dataclass(frozen=True)
class Overlap:
    """One record of another set that leaks a protected one: by id, or by a video with the same content."""

    set: str
    index: int
    id: str
    video: str
    by: str  # "id" | "content"
    protected_ids: tuple[str, ...]  # the protected set's records it shares the id or the video content with

    def to_dict(self) -> dict[str, Any]:
        return {"set": self.set, "index": self.index, "id": self.id, "video": self.video, "by": self.by, "protected_ids": list(self.protected_ids)}


def find_overlaps(protected: RecordSet, others: list[RecordSet]) -> list[Overlap]:
    """Every record of `others` that shares an id with `protected`, or whose video has the content of one
    of its videos: all of them, in set and record order."""
    ids = set(protected.ids)
    videos = [protected.video(r) for r in protected.records]
    index = ContentIndex(videos)
    ids_of_digest: dict[str, list[str]] = defaultdict(list)
    for video, rid in zip(videos, protected.ids):
        if video in index.digest_of:
            ids_of_digest[index.digest_of[video]].append(rid)
    found = []
    for other in others:
        paths = [other.video(r) for r in other.records]
        same = index.digests(paths)
        for i, (rid, path) in enumerate(zip(other.ids, paths)):
            if rid in ids:
                found.append(Overlap(other.role, i, rid, path, "id", (rid,)))
            if path in same:
                found.append(Overlap(other.role, i, rid, path, "content", tuple(dict.fromkeys(ids_of_digest[same[path]]))))
    return found


def overlaps(protected: RecordSet, others: list[RecordSet], found: list[Overlap] | None = None) -> list[str]:
    """Every way `protected` leaks into `others`, one line per set and kind (the first SHOWN named)."""
    found = find_overlaps(protected, others) if found is None else found
    problems = []
    for other in others:
        shared = [o.id for o in found if o.set == other.role and o.by == "id"]
        if shared:
            problems.append(f"{len(shared)} {protected.role} id(s) also in {other.role} ({other.annotation_path}): "
                            + ", ".join(shared[:SHOWN]) + (", ..." if len(shared) > SHOWN else ""))
        same = [f"{o.id} ({o.video})" for o in found if o.set == other.role and o.by == "content"]
        if same:
            problems.append(f"{len(same)} {other.role} record(s) whose video has the content of a {protected.role} video: "
                            + ", ".join(same[:SHOWN]) + (", ..." if len(same) > SHOWN else ""))
    return problems


def training_items(other: RecordSet, train: RecordSet, *, indices: list[int] | None = None,
                   train_records: list[dict[str, Any]] | None = None) -> list[str]:
    """Ids of `other`'s records (those at `indices`, default all) that are training items of `train`
    (or of its `train_records`): the video has a training record's video content (sha256; only files of
    a training clip's size are hashed) and the question is that record's."""
    records = train.records if train_records is None else train_records
    index = ContentIndex([train.video(r) for r in records])
    keys = {(index.digest_of.get(train.video(r)), chat.prompt_and_answer(r)[0]) for r in records}
    picked = range(len(other.records)) if indices is None else indices
    paths = [other.video(other.records[i]) for i in picked]
    same = index.digests(paths)
    return [str(other.records[i].get("id", i)) for i, p in zip(picked, paths)
            if p in same and (same[p], chat.prompt_and_answer(other.records[i])[0]) in keys]


def training_overlap(sets: dict[str, RecordSet], train: RecordSet, roles: tuple[str, ...] = ("proxy", "pool")) -> dict[str, dict[str, Any]]:
    """{role: {count, of, share, ids}}: the records of each role that are training items of `train`."""
    out = {}
    for role in roles:
        ids = training_items(sets[role], train)
        total = len(sets[role].records)
        out[role] = {"count": len(ids), "of": total, "share": round(len(ids) / total, 4) if total else 0.0, "ids": ids}
    return out


def overlap_lines(found: dict[str, dict[str, Any]], train_name: str) -> list[str]:
    """One warning per set with training items (the first SHOWN ids named)."""
    lines = []
    for role, o in found.items():
        if not o["count"]:
            continue
        named = ", ".join(o["ids"][:SHOWN]) + (", ..." if o["count"] > SHOWN else "")
        what = {"proxy": "a proxy of training items finds few gaps: the model answers what it was trained on",
                "pool": "mining them adds nothing (curation drops records already in training)"}.get(role, "")
        lines.append(f"{o['count']} of {o['of']} {role} record(s) ({o['share']:.0%}) are training items of {train_name} "
                     f"(same video content and question): {named}" + (f"; {what}" if what else ""))
    return lines


class OverlapError(InputError):
    """The benchmark leaks into a set the loop uses; `overlaps` holds every record (the message names the first few)."""

    def __init__(self, message: str, where: str, fix: str, overlaps: list[Overlap]) -> None:
        super().__init__(message, where=where, fix=fix)
        self.overlaps = overlaps


def check_disjoint(benchmark: RecordSet, others: list[RecordSet]) -> None:
    found = find_overlaps(benchmark, others)
    if found:
        raise OverlapError("the frozen benchmark overlaps data the loop mines, trains on or picks checkpoints with:\n    "
                           + "\n    ".join(overlaps(benchmark, others, found))
                           + f"\n    (all {len(found)}: `skillbank deft --config FILE --dry-run --json` lists every one under \"overlaps\")",
                           where="benchmark.annotation_path",
                           fix="remove those records from the pool / proxy / train set (or from the benchmark) so no id and no video content is shared",
                           overlaps=found)


def eval_spec_for(eval_config: dict[str, Any], *, model: str, data: RecordSet, results_dir: str | Path, source: str) -> Any:
    """The evaluate spec of one set: the user's evaluate config with its dataset and model replaced."""
    from skillbank.specification.evaluate import EvaluateSpec
    from skillbank.specification.validation import validate

    raw = {**eval_config, "results_dir": str(results_dir)}
    raw["dataset"] = {**(eval_config.get("dataset") or {}), "annotation_path": data.annotation_path, "media_dir": data.media_dir}
    raw["model"] = {**(eval_config.get("model") or {}), "model_name": model}
    return validate(EvaluateSpec, raw, source=source)
