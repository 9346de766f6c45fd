"""Curation: the mined records, whole, plus the base training set -> the round's training file.

A mined record keeps everything it had (id, video_fps, every turn, the prompt with its answer-format
instruction, family, attributes); only its `video` becomes an absolute path, so one file can hold
records from the base train set and the pool. Dropped: ids or (video, prompt) already in training,
and anything that is a benchmark item (by id or by video content) - the benchmark is never trained on.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from skillbank import atomic
from skillbank.data import chat
from skillbank.deft.sets import ContentIndex, RecordSet


def whole(record: dict[str, Any], data: RecordSet) -> dict[str, Any]:
    out = copy.deepcopy(record)
    out["video"] = data.video(record)
    return out


def _key(record: dict[str, Any]) -> tuple[str, str]:
    return str(record["video"]), chat.prompt_and_answer(record)[0]


def curate(mined: list[dict[str, Any]], pool: RecordSet, *, already: list[dict[str, Any]], benchmark: RecordSet,
           benchmark_content: ContentIndex | None = None) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """(records to add, counts of what was dropped and why). `already`: records in training (whole)."""
    seen_ids = {str(r.get("id")) for r in already}
    seen_keys = {_key(r) for r in already}
    bench_ids = set(benchmark.ids)
    content = benchmark_content or ContentIndex([benchmark.video(r) for r in benchmark.records])
    kept, dropped = [], {"duplicate": 0, "benchmark": 0}
    records = [whole(record, pool) for record in mined]
    leaking = content.digests([r["video"] for r in records])  # one batch: the hashes are cached (hashing.sha256_many)
    for rec in records:
        if str(rec.get("id")) in bench_ids or rec["video"] in leaking:
            dropped["benchmark"] += 1
            continue
        if str(rec.get("id")) in seen_ids or _key(rec) in seen_keys:
            dropped["duplicate"] += 1
            continue
        seen_ids.add(str(rec.get("id")))
        seen_keys.add(_key(rec))
        kept.append(rec)
    return kept, dropped


def write_training_set(path: Path, records: list[dict[str, Any]]) -> Path:
    return atomic.write_json(path, records, indent=None)
