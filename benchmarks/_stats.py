"""Small statistics the benchmarks print beside accuracies measured on the same held-out clips."""

from __future__ import annotations

import math

from skillbank.evaluation.metrics import wilson  # noqa: F401  (the library's one Wilson interval; benchmarks import it from here)


def mcnemar(a: list[bool], b: list[bool]) -> tuple[int, int, float]:
    """Exact two-sided McNemar test of two scorings of the same clips: (only a right, only b right, p)."""
    only_a = sum(x and not y for x, y in zip(a, b, strict=True))
    only_b = sum(y and not x for x, y in zip(a, b, strict=True))
    n = only_a + only_b
    p = min(1.0, 2 * sum(math.comb(n, i) for i in range(min(only_a, only_b) + 1)) / 2 ** n) if n else 1.0
    return only_a, only_b, p
