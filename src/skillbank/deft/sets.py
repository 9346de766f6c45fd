"""The loop's inputs, read once: the config's sets, the base train spec and the evaluate config,
and the disjointness rule (the frozen benchmark shares no id and no media file content with the
pool, the proxy set or the base training set)."""

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
from skillbank.hashing import sha256_file

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
    matches one of them, so checking a pool of millions costs a stat per file, not a read."""

    def __init__(self, paths: list[str]) -> None:
        self.by_size: dict[int, set[str]] = defaultdict(set)
        for p in set(paths):
            if os.path.isfile(p):
                self.by_size[os.path.getsize(p)].add(sha256_file(p))
        self._hashes: dict[str, str | None] = {}

    def matches(self, path: str) -> bool:
        try:
            size = os.path.getsize(path)
        except OSError:
            return False
        if size not in self.by_size:
            return False
        if path not in self._hashes:
            self._hashes[path] = sha256_file(path)
        return self._hashes[path] in self.by_size[size]


def overlaps(protected: RecordSet, others: list[RecordSet]) -> list[str]:
    """Every way `protected` leaks into `others`: shared ids, and media files with the same content."""
    problems = []
    ids = set(protected.ids)
    index = ContentIndex([protected.video(r) for r in protected.records])
    for other in others:
        shared = [i for i in other.ids if i in ids]
        if shared:
            problems.append(f"{len(shared)} {protected.role} id(s) also in {other.role} ({other.annotation_path}): "
                            + ", ".join(shared[:SHOWN]) + (", ..." if len(shared) > SHOWN else ""))
        same = [f"{r.get('id', i)} ({other.video(r)})" for i, r in enumerate(other.records) if index.matches(other.video(r))]
        if same:
            problems.append(f"{len(same)} {other.role} record(s) whose video has the content of a {protected.role} video: "
                            + ", ".join(same[:SHOWN]) + (", ..." if len(same) > SHOWN else ""))
    return problems


def check_disjoint(benchmark: RecordSet, others: list[RecordSet]) -> None:
    problems = overlaps(benchmark, others)
    if problems:
        raise InputError("the frozen benchmark overlaps data the loop mines, trains on or picks checkpoints with:\n    "
                         + "\n    ".join(problems), where="benchmark.annotation_path",
                         fix="remove those records from the pool / proxy / train set (or from the benchmark) so no id and no video content is shared")


def eval_spec_for(eval_config: dict[str, Any], *, model: str, data: RecordSet, results_dir: str | Path, source: str) -> Any:
    """The evaluate spec of one set: the user's evaluate config with its dataset and model replaced."""
    from skillbank.specification.evaluate import EvaluateSpec
    from skillbank.specification.validation import validate

    raw = {**eval_config, "results_dir": str(results_dir)}
    raw["dataset"] = {**(eval_config.get("dataset") or {}), "annotation_path": data.annotation_path, "media_dir": data.media_dir}
    raw["model"] = {**(eval_config.get("model") or {}), "model_name": model}
    return validate(EvaluateSpec, raw, source=source)
