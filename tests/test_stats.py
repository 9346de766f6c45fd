"""skillbank.scoring.stats against published values (and hand computations where a paper has none)."""

from __future__ import annotations

import math

import pytest

from skillbank.scoring.stats import binomial_half_cdf, holm, mcnemar_exact, n_for_lower_bound, newcombe_paired, wilson


@pytest.mark.parametrize("k, n, low, high", [
    # Newcombe 1998, "Two-sided confidence intervals for the single proportion: comparison of seven
    # methods", Stat Med 17:857, Table I, method 3 (Wilson score, no continuity correction)
    (81, 263, 0.2553, 0.3662),
    (15, 148, 0.0624, 0.1605),
    (0, 20, 0.0000, 0.1611),
    (1, 29, 0.0061, 0.1718),
])
def test_wilson_published_values(k, n, low, high):
    got = wilson(k, n)
    assert got[0] == pytest.approx(low, abs=5e-5) and got[1] == pytest.approx(high, abs=5e-5)


def test_wilson_edges():
    assert wilson(0, 0) == (0.0, 1.0)
    assert wilson(5, 5)[1] == 1.0 and wilson(0, 5)[0] == 0.0


def test_exact_mcnemar_known_values():
    assert mcnemar_exact(6, 0) == (0.03125, 0.015625)  # the known value: 2 * 0.5**6
    assert mcnemar_exact(0, 6) == (0.03125, 1.0)  # B better: one-sided "A is better" is 1
    assert mcnemar_exact(4, 0)[0] == 0.125  # the contaminated comparison, 6 -> 4 discordant pairs
    assert mcnemar_exact(3, 3)[0] == 1.0 and mcnemar_exact(0, 0) == (1.0, 1.0)
    # hand computed: 10 vs 2 -> 2 * (1 + 12 + 66) / 4096
    assert mcnemar_exact(10, 2)[0] == pytest.approx(2 * 79 / 4096, rel=1e-12)


def test_binomial_tails_large_n_agree_with_exact_sums():
    for n, k in ((1500, 700), (2500, 1200), (1001, 100), (4000, 2100)):
        exact = sum(math.comb(n, i) for i in range(k + 1)) / 2**n
        assert binomial_half_cdf(k, n) == pytest.approx(exact, rel=1e-9, abs=1e-300)
    assert binomial_half_cdf(-1, 10) == 0.0 and binomial_half_cdf(10, 10) == 1.0


def test_newcombe_paired_method_10_published_example():
    # Newcombe 1998, "Improved confidence intervals for the difference between binomial proportions
    # based on paired data", Stat Med 17:2635, Table II example (a): e=36, f=12, g=2, h=0;
    # theta = 0.2, method 10 interval 0.0569 to 0.3404
    low, high = newcombe_paired(36, 12, 2, 0)
    assert (round(low, 4), round(high, 4)) == (0.0569, 0.3404)


@pytest.mark.parametrize("table, low, high", [
    # Fagerland, Lydersen, Laake, "Statistical Analysis of Contingency Tables" (2017), chapter 8, the
    # Newcombe square-and-add interval (method 10): Bentur et al. 2009, Cavo et al. 2012
    ((1, 1, 7, 12), -0.507, -0.026),
    ((59, 6, 16, 80), -0.119, -0.005),
])
def test_newcombe_paired_textbook_examples(table, low, high):
    got = newcombe_paired(*table)
    assert (round(got[0], 3), round(got[1], 3)) == (low, high)


def test_newcombe_paired_edges():
    assert newcombe_paired(0, 0, 0, 0) == (-1.0, 1.0)
    low, high = newcombe_paired(0, 0, 0, 10)  # both always wrong: no difference, an interval around 0
    assert low < 0 < high and low == pytest.approx(-high)
    low, high = newcombe_paired(0, 10, 0, 0)  # A always right, B never: the difference is near 1
    assert 0.6 < low < 1.0 and high == 1.0


def test_holm_hand_computed():
    # sorted 0.005, 0.01, 0.03, 0.04 -> x4, x3, x2, x1 = 0.02, 0.03, 0.06, 0.04 -> running max 0.02, 0.03, 0.06, 0.06
    assert holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert holm([0.5, 0.9]) == [1.0, 1.0] and holm([]) == []


def test_smallest_n_for_a_lower_bound_of_0_9():
    # at accuracy 1.0 the Wilson lower bound is n / (n + z^2): >= 0.9 from n = 9 z^2 = 34.57, so 35
    assert n_for_lower_bound(1.0) == 35
    assert n_for_lower_bound(0.9) is None and n_for_lower_bound(0.5) is None
    n = n_for_lower_bound(0.95)
    assert wilson(round(0.95 * n), n)[0] >= 0.9 - 1e-3 and n > 35
    from skillbank.scoring.stats import wilson_p

    assert wilson_p(0.95, n)[0] >= 0.9 > wilson_p(0.95, n - 1)[0]
