"""Which pool records a round adds: nearest neighbours of the gaps, or a random control of the same size."""

from __future__ import annotations

import random
from collections.abc import Iterable
from typing import Any


def round_robin(indices: Any, scores: Any, *, budget: int, exclude: Iterable[int] = (), per_query: int | None = None) -> list[tuple[int, int, float]]:
    """(pool index, query row, score) to add: every gap's nearest unused neighbour first, then every
    gap's second, ... (each gap gets its share before one gap's far neighbours); within a rank the
    closer pairs first. Each gap contributes at most `per_query` (its k nearest records not used yet)."""
    used = set(exclude)
    queries, width = indices.shape
    rows: list[list[tuple[int, float]]] = []
    for q in range(queries):
        row = [(int(indices[q, j]), float(scores[q, j])) for j in range(width) if int(indices[q, j]) >= 0 and int(indices[q, j]) not in used]
        rows.append(row[: per_query or width])
    taken: set[int] = set()
    chosen: list[tuple[int, int, float]] = []
    for rank in range(max((len(r) for r in rows), default=0)):
        layer = sorted(((rows[q][rank][1], q, rows[q][rank][0]) for q in range(queries) if rank < len(rows[q])), key=lambda t: (-t[0], t[1]))
        for score, q, idx in layer:
            if idx in taken:
                continue
            taken.add(idx)
            chosen.append((idx, q, score))
            if len(chosen) >= budget:
                return chosen
    return chosen


def random_pick(n: int, *, budget: int, exclude: Iterable[int] = (), seed: int = 0) -> list[int]:
    """The control: `budget` pool indices drawn uniformly from those not used yet."""
    taken = set(exclude)
    free = [i for i in range(n) if i not in taken]
    rng = random.Random(seed)
    return sorted(rng.sample(free, min(budget, len(free))))
