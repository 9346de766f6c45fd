"""skillbank.scoring.stats against published values (and hand computations where a paper has none)."""

from __future__ import annotations

import math

import pytest

from skillbank.scoring.stats import (betainc, binomial_half_cdf, clopper_pearson, holm, mcnemar_exact, mcnemar_exact_interval,
                                     mcnemar_sample_size, n_for_half_width, n_for_lower_bound, newcombe_paired, wilson,
                                     wilson_half_width)


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


def test_exact_mcnemar_keeps_tiny_p_values():
    # 30 vs 0 discordant pairs: 2 * 0.5**30 = 1.862645149230957e-09, never rounded to 0
    two, one = mcnemar_exact(30, 0)
    assert two == 2 * 0.5**30 == pytest.approx(1.8626451e-9, rel=1e-7) and one == 0.5**30
    assert mcnemar_exact(5, 0) == (0.0625, 0.03125)


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


def test_smallest_n_for_a_half_width():
    # at p = 0.5 the Wilson half width is z / (2 sqrt(n + z^2)): +-0.15 from n = (1.96 / 0.3)^2 - 1.96^2 = 38.84, so 39
    # (the normal approximation's (1.96 * 0.5 / 0.15)^2 = 42.7 overstates it)
    assert n_for_half_width(0.15) == 39 == math.ceil((1.96 / 0.3) ** 2 - 1.96**2)
    assert wilson_half_width(0.5, 39) <= 0.15 < wilson_half_width(0.5, 38)
    assert wilson_half_width(0.5, 5) == pytest.approx(1.96 / (2 * math.sqrt(5 + 1.96**2)))  # 0.33: 5 records say little
    assert n_for_half_width(0.10) == math.ceil((1.96 / 0.2) ** 2 - 1.96**2) == 93
    assert n_for_half_width(0.15, p=0.9) < 39  # any other accuracy needs fewer: 0.5 is the bound
    with pytest.raises(ValueError):
        n_for_half_width(0.6)


@pytest.mark.parametrize("k, n, low, high", [
    # Newcombe 1998, Stat Med 17:857 (the same table as the Wilson values above), method 5: the exact
    # Clopper-Pearson interval
    (81, 263, 0.2527, 0.3676),
    (15, 148, 0.0578, 0.1617),
    (0, 20, 0.0000, 0.1684),
    (1, 29, 0.0009, 0.1776),
])
def test_clopper_pearson_published_values(k, n, low, high):
    got = clopper_pearson(k, n)
    assert (round(got[0], 4), round(got[1], 4)) == (low, high)


def test_clopper_pearson_closed_forms_and_conover_table():
    # 0 of n: upper = 1 - 0.025**(1/n); n of n: lower = 0.025**(1/n) (the binomial tail in closed form)
    for n in (1, 5, 40, 300):
        assert clopper_pearson(0, n) == (0.0, pytest.approx(1 - 0.025 ** (1 / n), abs=1e-12))
        assert clopper_pearson(n, n) == (pytest.approx(0.025 ** (1 / n), abs=1e-12), 1.0)
    # Conover (1999), Practical Nonparametric Statistics, Table A4: 5 of 25 -> 0.068 to 0.407
    low, high = clopper_pearson(5, 25)
    assert (round(low, 3), round(high, 3)) == (0.068, 0.407)
    assert clopper_pearson(0, 0) == (0.0, 1.0)


def test_betainc_is_the_binomial_tail():
    for k, n, p in ((3, 10, 0.3), (50, 120, 0.45), (0, 7, 0.2)):
        exact = sum(math.comb(n, i) * p**i * (1 - p) ** (n - i) for i in range(k + 1))
        assert betainc(n - k, k + 1, 1 - p) == pytest.approx(exact, rel=1e-10)
    for k, n in ((999, 2000), (100, 1001)):
        assert betainc(n - k, k + 1, 0.5) == pytest.approx(binomial_half_cdf(k, n), rel=1e-9, abs=1e-300)


def test_exact_conditional_interval_published_ratio_and_agreement_with_the_test():
    # Armitage and Berry (1994, p. 127), Liddell's (1983) exact interval of the ratio of discordant
    # pairs, 12 vs 2 -> R' = 6, 95% interval 1.335744 to 55.197091 (as StatsDirect prints it):
    # the same Clopper-Pearson interval of A's share psi of the discordant pairs, R = psi / (1 - psi)
    low, high = clopper_pearson(12, 14)
    assert low / (1 - low) == pytest.approx(1.335744, abs=1e-6) and high / (1 - high) == pytest.approx(55.197091, abs=1e-6)
    # on the difference scale, 50 items: (2 psi - 1) * 14 / 50
    lo, hi = mcnemar_exact_interval(12, 2, 50)
    assert lo == pytest.approx((2 * low - 1) * 14 / 50) and hi == pytest.approx((2 * high - 1) * 14 / 50) and lo < 0.2 < hi
    # it excludes 0 exactly when the exact two-sided p is below 0.05; Newcombe's need not:
    # 5 vs 0 of 100 items: p = 0.0625, Newcombe's interval excludes 0, the exact one does not
    assert mcnemar_exact_interval(5, 0, 100)[0] < 0 < newcombe_paired(95, 5, 0, 0)[0]
    assert mcnemar_exact_interval(6, 0, 100)[0] > 0 and mcnemar_exact(6, 0)[0] < 0.05
    for a in range(0, 25):
        for b in range(0, 25):
            if a + b:
                lo, hi = mcnemar_exact_interval(a, b, 60)
                assert (lo > 0 or hi < 0) == (mcnemar_exact(a, b)[0] < 0.05), (a, b)
    assert mcnemar_exact_interval(0, 0, 10) == (0.0, 0.0) and mcnemar_exact_interval(0, 0, 0) == (-1.0, 1.0)


def test_mcnemar_sample_size_connor_1987():
    # Connor 1987 (Biometrics 43:207, p. 209), as the powerandsamplesize.com calculator reproduces it:
    # p10 = 0.05, p01 = 0.45, two-sided alpha 0.05, power 0.8 -> n = 22.01, 23 pairs
    assert mcnemar_sample_size(0.05, 0.45, 1) == 23
    assert mcnemar_sample_size(5, 45, 100) == 23  # the same shares from counts
    # hand computed from the formula: p10 = 0.1, p01 = 0.05 -> ((1.96 sqrt(.15) + 0.8416 sqrt(.1475)) / .05)^2 = 468.57
    assert mcnemar_sample_size(10, 5, 100) == 469
    assert mcnemar_sample_size(3, 3, 50) is None and mcnemar_sample_size(0, 0, 0) is None
