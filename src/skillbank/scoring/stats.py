"""The statistics every report states its numbers with, once, in plain Python (no scipy: the sums are
small and exact here), each checked against published values in tests/test_stats.py.

- `wilson`: the 95% Wilson score interval of a proportion (Newcombe 1998, Stat Med 17:857, method 3).
  Unlike k/n +- z*se it stays inside [0, 1] and is honest at 0/n and n/n, which small evaluation sets
  hit often.
- `n_for_lower_bound`: the smallest n whose Wilson lower bound reaches a target at an accuracy: "how
  many samples before 0.93 on this family is evidence of 0.9?".
- `mcnemar_exact`: the exact McNemar test of two models on the same items: the discordant pairs (A
  right and B wrong, or the reverse) under H0 split as a fair coin (the exact binomial). Two-sided
  p = min(1, 2 * P(X <= min(b, c))); one-sided p for "A is better" = P(X >= b).
- `newcombe_paired`: the 95% interval of the difference of two paired proportions (accuracy of A minus
  accuracy of B on the same items): Newcombe 1998, Stat Med 17:2635, method 10 (Wilson intervals of
  both marginals combined with the correlation of the pairs, phi corrected as the paper defines).
- `holm`: Holm's step-down adjustment of p-values for testing several families at once.

This module imports nothing from skillbank: any floor may use it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

Z95 = 1.96  # the normal quantile of a 95% interval, as the published tables use it


def wilson_p(p: float, n: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of an observed proportion p on n samples ((0, 1) when n is 0)."""
    if n <= 0:
        return 0.0, 1.0
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(max(p * (1 - p), 0.0) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def wilson(k: int, n: int, z: float = Z95) -> tuple[float, float]:
    """The 95% Wilson score interval of k successes in n trials ((0, 1) when n is 0)."""
    return wilson_p(k / n if n else 0.0, n, z)


def n_for_lower_bound(accuracy: float, target: float = 0.9, z: float = Z95) -> int | None:
    """The smallest n at which an observed `accuracy` has a Wilson lower bound >= target; None when
    accuracy <= target (no sample size makes such an accuracy evidence of the target). The lower
    bound grows with n towards the accuracy, so a doubling search then a bisection finds it."""
    if accuracy <= target:
        return None
    high = 1
    while wilson_p(accuracy, high, z)[0] < target:
        high *= 2
    low = high // 2  # below the answer (or 0)
    while high - low > 1:
        mid = (low + high) // 2
        if wilson_p(accuracy, mid, z)[0] >= target:
            high = mid
        else:
            low = mid
    return high


def binomial_half_cdf(k: int, n: int) -> float:
    """P(X <= k) for X ~ Binomial(n, 1/2), exact to double precision at any n.

    Small n: integer sums (math.comb). Large n: terms in log space from k downwards, stopping when
    they no longer change the sum (below the mode each term is smaller than the one above it)."""
    if k < 0:
        return 0.0
    if k >= n:
        return 1.0
    if n <= 1000:
        return sum(math.comb(n, i) for i in range(k + 1)) / 2**n  # int / int: correctly rounded
    return _log_sum(k, n)


def _log_sum(k: int, n: int) -> float:
    if k > n // 2:  # the upper part by symmetry keeps the downward sum short and accurate
        return 1.0 - _log_sum(n - k - 1, n)
    log_half = n * math.log(0.5)

    def log_term(i: int) -> float:
        return math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1) + log_half

    top = log_term(k)
    total = 0.0
    for i in range(k, -1, -1):
        ratio = math.exp(log_term(i) - top)
        total += ratio
        if ratio < 1e-17 * total:
            break
    return min(1.0, math.exp(top) * total)


def mcnemar_exact(a_only: int, b_only: int) -> tuple[float, float]:
    """(two-sided p, one-sided p for "A is better than B") of the exact McNemar test, from the
    discordant pairs: a_only items A got right and B wrong, b_only the reverse. 6 vs 0 gives
    (0.03125, 0.015625); no discordant pair gives (1.0, 1.0)."""
    n = a_only + b_only
    if n == 0:
        return 1.0, 1.0
    two_sided = min(1.0, 2.0 * binomial_half_cdf(min(a_only, b_only), n))
    one_sided = binomial_half_cdf(b_only, n)  # P(X >= a_only) = P(X <= b_only) at p = 1/2
    return two_sided, one_sided


def newcombe_paired(both: int, a_only: int, b_only: int, neither: int, z: float = Z95) -> tuple[float, float]:
    """The 95% interval of accuracy(A) - accuracy(B) on paired items (Newcombe 1998, method 10).

    both: items both got right; a_only: A right, B wrong; b_only: B right, A wrong; neither: both wrong.
    The Wilson intervals (l1, u1) of A's accuracy p1 and (l2, u2) of B's p2 combine as
      lower = d - sqrt((p1 - l1)^2 - 2 phi (p1 - l1)(u2 - p2) + (u2 - p2)^2)
      upper = d + sqrt((u1 - p1)^2 - 2 phi (u1 - p1)(p2 - l2) + (p2 - l2)^2)
    with d = p1 - p2 and phi the pairs' correlation (both*neither - a_only*b_only) / sqrt(product of the
    four margins), 0 when a margin is 0; as the paper defines it, a positive numerator is first reduced
    by n/2 (to 0 at most). (-1, 1) when there are no items."""
    n = both + a_only + b_only + neither
    if n == 0:
        return -1.0, 1.0
    p1, p2 = (both + a_only) / n, (both + b_only) / n
    l1, u1 = wilson(both + a_only, n, z)
    l2, u2 = wilson(both + b_only, n, z)
    margins = (both + a_only) * (b_only + neither) * (both + b_only) * (a_only + neither)
    phi = 0.0
    if margins:
        cross = both * neither - a_only * b_only
        cross = max(cross - n / 2, 0.0) if cross > 0 else cross
        phi = cross / math.sqrt(margins)
    d = p1 - p2
    lower = d - math.sqrt(max((p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2, 0.0))
    upper = d + math.sqrt(max((u1 - p1) ** 2 - 2 * phi * (u1 - p1) * (p2 - l2) + (p2 - l2) ** 2, 0.0))
    return max(-1.0, lower), min(1.0, upper)


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values, in the input's order: the i-th smallest (from 0) is
    multiplied by (m - i), running maxima keep the order, and none exceeds 1."""
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    adjusted = [0.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p_values[i]))
        adjusted[i] = running
    return adjusted
