"""Shift statistics (ragmon.stats.shift): known answers against SciPy, Hypothesis properties, and the sketch forms vs
the sample forms."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as sp

from ragmon.drift.method.summary import LEVELS
from ragmon.stats import shift as stats

finite = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False, allow_infinity=False)
samples = st.lists(finite, min_size=1, max_size=60)


@pytest.mark.parametrize("seed,shift,n,m",
                         [(1, 0.0, 200, 50), (2, 0.5, 1000, 300), (3, 0.1, 50, 5000), (4, 2.0, 30, 30)])
def test_ks_matches_scipy_asymp(seed: int, shift: float, n: int, m: int) -> None:
    rng = np.random.default_rng(seed)
    a, b = rng.normal(size=n), rng.normal(shift, size=m)
    d, p = stats.ks_2samp(a, b)
    expected = sp.ks_2samp(a, b, method="asymp")
    assert d == pytest.approx(expected.statistic, abs=1e-12)
    assert p == pytest.approx(expected.pvalue, rel=1e-9, abs=1e-15)


def test_ks_with_ties_matches_scipy() -> None:
    a = np.array([1, 1, 2, 2, 2, 3, 5, 5], dtype=float)
    b = np.array([1, 2, 3, 3, 3, 4, 5], dtype=float)
    assert stats.ks_statistic(a, b) == pytest.approx(sp.ks_2samp(a, b).statistic)


def test_ks_hand_calculation() -> None:
    # F_a jumps to 1 at 1; F_b is 0 until 2: D = 1
    assert stats.ks_statistic([0.0, 1.0], [2.0, 3.0]) == 1.0
    assert stats.ks_statistic([1.0, 2.0, 3.0, 4.0], [3.0, 4.0, 5.0, 6.0]) == 0.5


def test_wasserstein_matches_scipy() -> None:
    rng = np.random.default_rng(7)
    a, b = rng.gamma(2.0, size=500), rng.gamma(2.5, size=120)
    assert stats.wasserstein(a, b) == pytest.approx(sp.wasserstein_distance(a, b), rel=1e-12)
    assert stats.wasserstein([0.0, 1.0, 3.0], [5.0, 6.0, 8.0]) == pytest.approx(5.0)


@pytest.mark.parametrize("table", [[[10, 20], [30, 25]], [[5, 0, 7], [3, 9, 2]], [[120, 880], [30, 170]]])
def test_chi_square_matches_scipy(table: list[list[int]]) -> None:
    chi2, p, dof = stats.chi_square(table)
    expected = sp.chi2_contingency(np.array(table), correction=False)
    assert chi2 == pytest.approx(expected.statistic)
    assert p == pytest.approx(expected.pvalue)
    assert dof == expected.dof


def test_two_proportion_equals_chi_square_2x2() -> None:
    z, p = stats.two_proportion_z(30, 1000, 55, 1000)
    expected = sp.chi2_contingency(np.array([[30, 970], [55, 945]]), correction=False)
    assert z**2 == pytest.approx(expected.statistic)
    assert p == pytest.approx(expected.pvalue)
    assert z > 0  # the current rate is higher


def test_two_proportion_rejects_impossible_counts() -> None:
    with pytest.raises(ValueError, match="current window"):
        stats.two_proportion_z(1, 10, 11, 10)


def test_psi_hand_calculation() -> None:
    # proportions 0.5/0.5 vs 0.8/0.2: (0.3·ln 1.6) + (−0.3·ln 0.4)
    assert stats.psi_from_counts([50, 50], [80, 20]) == pytest.approx(0.3 * np.log(1.6) - 0.3 * np.log(0.4))


def test_psi_large_shift_is_major_and_no_shift_is_small() -> None:
    rng = np.random.default_rng(3)
    ref = rng.normal(size=20_000)
    assert stats.psi(ref, rng.normal(size=20_000)) < 0.01
    assert stats.psi(ref, rng.normal(1.0, size=20_000)) > 0.25


def test_benjamini_hochberg_matches_scipy() -> None:
    p = np.array([0.01, 0.04, 0.03, 0.2, 0.5, np.nan, 0.001])
    adjusted = stats.benjamini_hochberg(p)
    ok = np.isfinite(p)
    assert np.isnan(adjusted[5])
    assert adjusted[ok] == pytest.approx(sp.false_discovery_control(p[ok], method="bh"))


def test_sketch_forms_agree_with_sample_forms() -> None:
    rng = np.random.default_rng(11)
    a, b = rng.normal(size=20_000), rng.normal(0.2, 1.3, size=5_000)
    qa, qb = np.quantile(a, LEVELS), np.quantile(b, LEVELS)
    assert stats.ks_from_quantiles(qa, qb, LEVELS) == pytest.approx(stats.ks_statistic(a, b), abs=0.01)
    assert stats.wasserstein_from_quantiles(qa, qb, LEVELS) == pytest.approx(stats.wasserstein(a, b), rel=0.05)
    rc, cc = stats.psi_counts_from_quantiles(qa, qb, LEVELS, a.size, b.size)
    assert stats.psi_from_counts(rc, cc) == pytest.approx(stats.psi(a, b), rel=0.05)


def test_sketch_of_a_discrete_feature_keeps_atoms() -> None:
    a = np.repeat([5.0, 10.0], [200, 800])  # n_results: 20 % short lists
    b = np.repeat([5.0, 10.0], [500, 500])
    d = stats.ks_from_quantiles(np.quantile(a, LEVELS), np.quantile(b, LEVELS), LEVELS)
    assert d == pytest.approx(stats.ks_statistic(a, b), abs=0.011)


def test_ks_batch_matches_single() -> None:
    rng = np.random.default_rng(5)
    ref, cur = rng.normal(size=(4, 300)), rng.normal(0.3, size=(4, 80))
    batch = stats.ks_statistic_batch(ref, cur)
    assert batch == pytest.approx([stats.ks_statistic(r, c) for r, c in zip(ref, cur, strict=True)])


def test_errors_say_what_was_expected() -> None:
    with pytest.raises(ValueError, match="at least one finite value"):
        stats.ks_statistic([np.nan], [1.0])
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        stats.ks_pvalue(1.5, 10, 10)
    with pytest.raises(ValueError, match="p-values"):
        stats.benjamini_hochberg([0.5, 2.0])


# -- properties ---------------------------------------------------------------------------------------------


@settings(max_examples=150, deadline=None)
@given(samples)
def test_psi_of_identical_samples_is_zero(x: list[float]) -> None:
    assert stats.psi(x, x) == 0.0


@settings(max_examples=150, deadline=None)
@given(samples, samples)
def test_ks_bounded_and_symmetric(a: list[float], b: list[float]) -> None:
    d = stats.ks_statistic(a, b)
    assert 0.0 <= d <= 1.0
    assert d == stats.ks_statistic(b, a)
    assert 0.0 <= stats.ks_pvalue(d, len(a), len(b)) <= 1.0


@settings(max_examples=150, deadline=None)
@given(samples, samples)
def test_wasserstein_symmetric_nonnegative(a: list[float], b: list[float]) -> None:
    w = stats.wasserstein(a, b)
    assert w >= 0.0
    assert w == pytest.approx(stats.wasserstein(b, a), rel=1e-9, abs=1e-9)
    assert stats.wasserstein(a, a) == 0.0


@settings(max_examples=150, deadline=None)
@given(samples, samples)
def test_psi_nonnegative(a: list[float], b: list[float]) -> None:
    assert stats.psi(a, b) >= 0.0


@settings(max_examples=150, deadline=None)
@given(st.lists(st.floats(min_value=0, max_value=1), min_size=1, max_size=50))
def test_bh_adjusted_bounds_and_order(p: list[float]) -> None:
    adjusted = stats.benjamini_hochberg(p)
    pa = np.asarray(p)
    assert np.all(adjusted >= pa - 1e-12) and np.all(adjusted <= 1.0)
    order = np.argsort(pa, kind="stable")
    assert np.all(np.diff(adjusted[order]) >= -1e-12)  # monotone in the raw p-value


@settings(max_examples=100, deadline=None)
@given(st.lists(finite, min_size=2, max_size=40))
def test_sketch_of_identical_samples_shows_no_drift(x: list[float]) -> None:
    q = np.quantile(np.asarray(x), LEVELS)
    assert stats.ks_from_quantiles(q, q, LEVELS) == 0.0
    assert stats.wasserstein_from_quantiles(q, q, LEVELS) == 0.0
    rc, cc = stats.psi_counts_from_quantiles(q, q, LEVELS, len(x), len(x))
    assert stats.psi_from_counts(rc, cc) == pytest.approx(0.0, abs=1e-12)


@settings(max_examples=100, deadline=None)
@given(st.lists(finite, min_size=2, max_size=80), st.lists(finite, min_size=2, max_size=80))
def test_registry_outcomes_are_well_formed(a: list[float], b: list[float]) -> None:
    from ragmon.drift.method.registry import Comparison, get_test
    from ragmon.drift.method.summary import ContinuousSummary

    pair = Comparison.of_pair(ContinuousSummary.from_samples(a), ContinuousSummary.from_samples(b))
    for name in ("ks", "psi"):
        o = get_test(name).run(pair)
        assert 0.0 <= o.p_value <= 1.0 and o.effect >= 0.0 and np.isfinite(o.statistic)
    assert 0.0 <= get_test("ks").run(pair).statistic <= 1.0


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 10_000), st.integers(1, 10_000), st.floats(0, 1), st.floats(0, 1))
def test_rate_tests_are_well_formed(n1: int, n2: int, f1: float, f2: float) -> None:
    from ragmon.drift.method.registry import Comparison, get_test
    from ragmon.drift.method.summary import RateSummary

    pair = Comparison.of_pair(RateSummary(n1, int(f1 * n1)), RateSummary(n2, int(f2 * n2)))
    z = get_test("two_proportion").run(pair)
    chi = get_test("chi_square").run(pair)
    assert 0.0 <= z.p_value <= 1.0 and z.effect >= 0.0
    assert chi.p_value == pytest.approx(z.p_value, abs=1e-9)


def test_registry_refuses_the_wrong_kind() -> None:
    from ragmon.drift.method.registry import Comparison, get_test
    from ragmon.drift.method.summary import ContinuousSummary, RateSummary

    continuous = Comparison.of_pair(ContinuousSummary.from_samples([1.0, 2.0]), ContinuousSummary.from_samples([1.0]))
    with pytest.raises(ValueError, match="applies to \\['rate'\\] features, got continuous"):
        get_test("two_proportion").run(continuous)
    with pytest.raises(ValueError, match="applies to \\['rate'\\] features, got continuous"):
        get_test("window_rate").run(continuous)
    with pytest.raises(ValueError, match="unknown drift test 'nope'; known tests: chi_square, ks"):
        get_test("nope")
    with pytest.raises(ValueError):
        get_test("ks").run(Comparison.of_pair(RateSummary(10, 1), RateSummary(10, 2)))
