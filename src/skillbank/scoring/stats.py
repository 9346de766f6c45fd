"""The statistics every report states its numbers with, once, in plain Python (no scipy: the sums are
small and exact here), each checked against published values in tests/test_stats.py.

- `wilson`: the 95% Wilson score interval of a proportion (Newcombe 1998, Stat Med 17:857, method 3).
  Unlike k/n +- z*se it stays inside [0, 1] and is honest at 0/n and n/n, which small evaluation sets
  hit often.
- `n_for_lower_bound`: the smallest n whose Wilson lower bound reaches a target at an accuracy: "how
  many samples before 0.93 on this family is evidence of 0.9?".
- `n_for_half_width`: the smallest n whose Wilson interval is at most +-h wide at an accuracy (the widest,
  0.5, by default): "how many records before a set can measure an accuracy to +-15 points at all?" (39: MEASURE_MIN_RECORDS,
  the bar the DEFT proxy and the val split of `data import` are held to).
- `mcnemar_exact`: the exact McNemar test of two models on the same items: the discordant pairs (A
  right and B wrong, or the reverse) under H0 split as a fair coin (the exact binomial). Two-sided
  p = min(1, 2 * P(X <= min(b, c))); one-sided p for "A is better" = P(X >= b).
- `newcombe_paired`: the 95% interval of the difference of two paired proportions (accuracy of A minus
  accuracy of B on the same items): Newcombe 1998, Stat Med 17:2635, method 10 (Wilson intervals of
  both marginals combined with the correlation of the pairs, phi corrected as the paper defines).
- `holm`: Holm's step-down adjustment of p-values for testing several families at once.
- `clopper_pearson`: the exact (Clopper and Pearson 1934) 95% interval of a proportion, from the
  regularized incomplete beta function (`betainc`, a continued fraction).
- `mcnemar_exact_interval`: the 95% interval of the paired difference that agrees with the exact
  McNemar test: the Clopper-Pearson interval of A's share of the discordant pairs, conditional on
  their number (the exact conditional interval of Liddell 1983), put on the difference scale. It
  excludes 0 exactly when the exact two-sided p is below 0.05, which Newcombe's interval need not do.
- `mcnemar_sample_size`: the pairs needed to detect a paired difference with a two-sided McNemar test
  at a given power (Connor 1987, Biometrics 43:207, eq. 3).

This module imports nothing from skillbank: any floor may use it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from statistics import NormalDist

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


def wilson_half_width(p: float, n: int, z: float = Z95) -> float:
    """Half the width of the Wilson interval of a proportion p on n samples (0.5 when n is 0)."""
    low, high = wilson_p(p, n, z)
    return (high - low) / 2


def n_for_half_width(half: float, p: float = 0.5, z: float = Z95) -> int:
    """The smallest n whose Wilson interval at an observed `p` is at most +-`half` wide. At p = 0.5 (the
    widest interval of any accuracy, unclipped) the half width is z / (2 sqrt(n + z^2)), so n =
    ceil((z / (2 half))^2 - z^2): 39 for +-0.15. The half width falls with n, so a doubling search then
    a bisection finds it at any p."""
    if not 0 < half < 0.5:
        raise ValueError(f"half width {half} is not between 0 and 0.5")
    high = 1
    while wilson_half_width(p, high, z) > half:
        high *= 2
    low = high // 2  # above the half width (or 0)
    while high - low > 1:
        mid = (low + high) // 2
        if wilson_half_width(p, mid, z) <= half:
            high = mid
        else:
            low = mid
    return high


# The coarsest precision a set that reports an accuracy must reach before its figure means anything: a 95% interval
# of at most +-15 points at any accuracy (enough to see a family failing, not a 2-point gain). The Wilson interval
# is widest at 50% accuracy, z / (2 sqrt(n + z^2)) each side, which is at most 0.15 from n = 39 on (computed here;
# the normal approximation's 43 overstates it). 5 records give +-33 points, one answer moving 20; 1 record +-45.
# The DEFT proxy (deft.rules) and the val split `data import` carves (intake.split) are held to it.
MEASURE_HALF_WIDTH = 0.15
MEASURE_MIN_RECORDS = n_for_half_width(MEASURE_HALF_WIDTH)  # 39


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


# ---- exact intervals ------------------------------------------------------------------------------


def _beta_fraction(a: float, b: float, x: float) -> float:
    """The continued fraction of the incomplete beta function (modified Lentz; Press et al., Numerical
    Recipes, 3rd ed., section 6.4), converging fast for x < (a + 1) / (a + b + 2)."""
    tiny, eps = 1e-300, 1e-16
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 10_000):
        for num in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)), -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1.0 + num * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + num / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < eps:
            break
    return h


def betainc(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function I_x(a, b) (a, b > 0): P(X <= k) of Binomial(n, p) is
    I_{1-p}(n - k, k + 1)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    log_front = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    if x < (a + 1) / (a + b + 2):
        return math.exp(log_front) * _beta_fraction(a, b, x) / a
    return 1.0 - math.exp(log_front) * _beta_fraction(b, a, 1.0 - x) / b


def _beta_quantile(q: float, a: float, b: float) -> float:
    """The x with I_x(a, b) = q, by bisection (I_x rises with x); 60 halvings reach double precision."""
    low, high = 0.0, 1.0
    for _ in range(100):
        mid = (low + high) / 2
        if betainc(a, b, mid) < q:
            low = mid
        else:
            high = mid
        if high - low < 1e-15:
            break
    return (low + high) / 2


def clopper_pearson(k: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """The exact interval of k successes in n trials: the p at which P(X >= k) and P(X <= k) are each
    (1 - level) / 2, i.e. beta quantiles (0 at k = 0, 1 at k = n; (0, 1) when n is 0)."""
    if n <= 0:
        return 0.0, 1.0
    tail = (1 - level) / 2
    low = 0.0 if k <= 0 else _beta_quantile(tail, k, n - k + 1)
    high = 1.0 if k >= n else _beta_quantile(1 - tail, k + 1, n - k)
    return low, high


def mcnemar_exact_interval(a_only: int, b_only: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """The interval of accuracy(A) - accuracy(B) on n paired items that agrees with the exact McNemar test.

    Given d = a_only + b_only discordant pairs, A's share of them psi has the Clopper-Pearson interval
    (low, high) (the exact conditional interval; Liddell 1983, Stat Med 2:171, gives it as the ratio
    psi / (1 - psi)); the difference is (a_only - b_only) / n = (2 psi - 1) d / n, so the interval is
    ((2 low - 1) d / n, (2 high - 1) d / n). It excludes 0 exactly when the exact two-sided p is below
    1 - level. Conditional on d, it says nothing about the pairs that agreed: with no discordant pair it
    is (0, 0); (-1, 1) when there are no items."""
    if n <= 0:
        return -1.0, 1.0
    d = a_only + b_only
    if d == 0:
        return 0.0, 0.0
    low, high = clopper_pearson(a_only, d, level)
    return (2 * low - 1) * d / n, (2 * high - 1) * d / n


def mcnemar_sample_size(a_only: float, b_only: float, n: float, power: float = 0.8, alpha: float = 0.05) -> int | None:
    """The pairs a two-sided McNemar test at `alpha` needs to detect the difference seen (discordant
    shares p10 = a_only / n, p01 = b_only / n) with probability `power`: Connor 1987 (Biometrics 43:207,
    eq. 3), n = ((z_{1-alpha/2} sqrt(psi) + z_{power} sqrt(psi - delta^2)) / delta)^2 rounded up, with
    psi = p10 + p01 and delta = p10 - p01 (the normal approximation of the test; the exact test needs a
    few more). None when the difference seen is 0 (no n detects it) or there are no items."""
    if n <= 0 or a_only == b_only:
        return None
    psi, delta = (a_only + b_only) / n, (a_only - b_only) / n
    z = NormalDist()
    root = z.inv_cdf(1 - alpha / 2) * math.sqrt(psi) + z.inv_cdf(power) * math.sqrt(max(psi - delta * delta, 0.0))
    return math.ceil((root / delta) ** 2 - 1e-9)
