"""Nearest neighbours over L2-normalised embeddings (inner product = cosine) with FAISS.

Exact (IndexFlatIP) up to `exact_max` vectors; above, an IVF index (IndexIVFFlat, nlist ~ sqrt(n),
trained on a sample of at most 64 vectors per list) probed with `nprobe` lists per query, kept on
disk beside the pool embeddings so later rounds skip the training. The crossover, measured by
benchmarks/deft_mining.py, is in skills/applications/tao-run-deft/references/mining.md.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass
class Neighbours:
    scores: Any  # float32 [queries, k]
    indices: Any  # int64 [queries, k]; -1 where fewer than k were found
    kind: str  # "exact" | "ivf"


def normalise(x: Any) -> Any:
    import numpy as np

    x = np.ascontiguousarray(x, dtype=np.float32)
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return x / np.maximum(norms, 1e-12)


def nlist_for(n: int) -> int:
    return max(1, min(n // 39, int(math.sqrt(n))))  # FAISS wants >= 39 training points per list


def build_index(vectors: Any, *, exact_max: int = 100_000, seed: int = 0, nlist: int | None = None) -> tuple[Any, str]:
    """An index holding `vectors` (already normalised), exact or IVF by size."""
    import faiss
    import numpy as np

    n, d = vectors.shape
    if n <= exact_max:
        index = faiss.IndexFlatIP(d)
        index.add(vectors)
        return index, "exact"
    lists = nlist or nlist_for(n)
    quantizer = faiss.IndexFlatIP(d)
    index = faiss.IndexIVFFlat(quantizer, d, lists, faiss.METRIC_INNER_PRODUCT)
    rng = np.random.default_rng(seed)
    sample = vectors[np.sort(rng.choice(n, size=min(n, 64 * lists), replace=False))]
    index.cp.seed = seed
    index.train(sample)
    index.add(vectors)
    return index, "ivf"


def search(pool: Any, queries: Any, k: int, *, exact_max: int = 100_000, nprobe: int = 16, seed: int = 0,
           cache: str | Path | None = None) -> Neighbours:
    """The k nearest pool vectors of each query (both normalised here). `cache`: a file where an IVF
    index is kept (trained once per pool embeddings; the exact index costs only a copy to build)."""
    import faiss

    pool, queries = normalise(pool), normalise(queries)
    if cache is not None and pool.shape[0] > exact_max and Path(cache).is_file():
        index, kind = faiss.read_index(str(cache)), "ivf"
    else:
        index, kind = build_index(pool, exact_max=exact_max, seed=seed)
        if cache is not None and kind == "ivf":
            from skillbank import atomic

            with atomic.atomic_path(cache) as tmp:
                faiss.write_index(index, str(tmp))
    if kind == "ivf":
        index.nprobe = nprobe
    scores, indices = index.search(queries, min(k, pool.shape[0]))
    return Neighbours(scores, indices, kind)
