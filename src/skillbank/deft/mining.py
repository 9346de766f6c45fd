"""One round's gaps and mining: which proxy records the model fails, and which pool records to add.

Gaps are the failures gap analysis writes (skillbank.gaps.analyze.analyze_gaps, exact match) plus
every row of results.json whose answer cannot be scored (empty, no extractable answer, no label of
the task): an unparseable answer is a gap, never skipped.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Callable

from skillbank import atomic
from skillbank.deft import embed as embed_mod
from skillbank.deft.select import random_pick, round_robin
from skillbank.deft.sets import RecordSet

SEARCH_CAP = 2048  # neighbours asked per gap at most (k + records already used)
EXAMPLES = 5


def gap_ids(results_dir: str, out: Path, proxy: RecordSet, eval_spec: Any) -> tuple[list[str], dict[str, Any]]:
    """(ids of failing proxy records in proxy order, {total, unparseable, summary_path})."""
    import pyarrow.parquet as pq

    from skillbank.scoring.answers import unscorable
    from skillbank.evaluation.results import scoring_defaults
    from skillbank.gaps.analyze import analyze_gaps, summary_path

    summary = analyze_gaps(results_dir, str(out), annotations=proxy.annotation_path, media_root=proxy.media_dir)
    failing = {str(x) for x in pq.read_table(out, columns=["video_id"]).column("video_id").to_pylist()}
    rows = json.loads((Path(results_dir) / "results.json").read_text(encoding="utf-8"))
    # null answer_type (from the model's recipe): the one evaluate scored with, as its metrics.json records
    _, answer_type = scoring_defaults(str(Path(results_dir) / "results.json"), eval_spec.task.type, eval_spec.evaluation.answer_type)
    bad = unscorable(rows, eval_spec.task.type, answer_type)
    failing |= {str(rows[i].get("video_id")) for i in bad}
    failing |= {str(row.get("video_id")) for row in rows if row.get("correct") is False}
    ordered = [i for i in proxy.ids if i in failing]
    return ordered, {"total": summary.get("total", len(rows)), "unparseable": len(bad), "summary_path": summary_path(str(out))}


def _embeddings(data: RecordSet, embedder: Callable, key: dict[str, Any], cache_dir: Path) -> tuple[Any, Path, bool]:
    fields = {**key, "set": embed_mod.file_sha256(data.annotation_path), "media_dir": str(Path(data.media_dir).resolve())}
    return embed_mod.cached_embeddings(cache_dir, fields, len(data.records),
                                       lambda start, stop: embedder(data.records[start:stop], data.media_dir))


def mine(mining: Any, *, pool: RecordSet, proxy: RecordSet, gap_ids: list[str], eval_spec: Any, model: str, used: list[int],
         out: Path, cache_dir: Path, log: Callable[[str], None], round_no: int = 1) -> dict[str, Any]:
    """Select up to mining.records_per_round unused pool records; write mined.json (the pool records
    as they are) and selection.json (pool indices, scores, the gap each was found for)."""
    import numpy as np

    budget = mining.records_per_round
    stats: dict[str, Any] = {"strategy": mining.strategy, "index": None}
    if mining.strategy == "random":
        picks = [(i, -1, 0.0) for i in random_pick(len(pool.records), budget=budget, exclude=used, seed=mining.seed + round_no)]
    else:
        from skillbank.deft.index import search

        embedder, key = embed_mod.make_embedder(mining.embedder, model, eval_spec, batch_size=mining.batch_size)
        t = time.perf_counter()
        pool_vecs, pool_file, reused = _embeddings(pool, embedder, key, cache_dir)
        proxy_vecs, _, _ = _embeddings(proxy, embedder, key, cache_dir)
        stats.update(embed_s=round(time.perf_counter() - t, 3), pool_embeddings=str(pool_file), embeddings_reused=reused, dim=int(pool_vecs.shape[1]))
        row_of = {rid: i for i, rid in enumerate(proxy.ids)}
        rows = [row_of[g] for g in gap_ids if g in row_of]
        t = time.perf_counter()
        width = min(len(pool.records), min(SEARCH_CAP, mining.k + len(used)))
        rows_q = np.asarray(proxy_vecs[rows], dtype=np.float32)
        centre = np.asarray(pool_vecs.mean(axis=0, keepdims=True), dtype=np.float32)  # mean-pooled states share one big direction: remove it
        found = search(pool_vecs - centre, rows_q - centre, width, exact_max=mining.exact_max, nprobe=mining.nprobe, seed=mining.seed,
                       cache=pool_file.with_suffix(f".ivf{mining.seed}.faiss"))
        stats.update(search_s=round(time.perf_counter() - t, 4), index=found.kind)
        picks = [(idx, rows[q], s) for idx, q, s in round_robin(found.indices, found.scores, budget=budget, exclude=used, per_query=mining.k)]
    mined = [pool.records[i] for i, _, _ in picks]
    selection = {"pool_indices": [i for i, _, _ in picks], "ids": [str(r.get("id")) for r in mined],
                 "gap": [proxy.ids[q] if q >= 0 else None for _, q, _ in picks], "score": [round(s, 6) for _, _, s in picks]}
    atomic.write_json(out / "mined.json", mined, indent=None)
    atomic.write_json(out / "selection.json", selection)
    families: dict[str, int] = {}
    for rec in mined:
        families[str(rec.get("family") or "-")] = families.get(str(rec.get("family") or "-"), 0) + 1
    examples = []
    for (i, q, s), rec in list(zip(picks, mined))[:EXAMPLES]:
        from skillbank.data import chat

        question, answer = chat.prompt_and_answer(rec)
        examples.append({"id": str(rec.get("id")), "family": rec.get("family"), "question": question, "answer": answer,
                         "for_gap": proxy.ids[q] if q >= 0 else None, "score": round(s, 4)})
    return {"outputs": {"mined": out / "mined.json", "selection": out / "selection.json"}, "selected": len(mined),
            "families": dict(sorted(families.items())), "examples": examples, **stats}
