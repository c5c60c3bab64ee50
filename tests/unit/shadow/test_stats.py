"""Paired statistics: bootstrap interval (seeded, covers the mean), sign test against hand calculation and
SciPy, the distribution shift against SciPy."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import stats as sps

from ragmon.shadow.stats import bootstrap_mean_ci, distribution_shift, paired_difference, sign_test


def test_sign_test_by_hand():
    # 9 wins, 1 loss, 2 ties: P(X <= 1) for Binomial(10, 0.5) = 11/1024, two-sided doubles it
    r = sign_test([1, 1, 1, 1, 1, 1, 1, 1, 1, -1, 0, 0])
    assert (r.wins, r.losses, r.ties) == (9, 1, 2)
    assert r.p_value == pytest.approx(22 / 1024)
    assert sign_test([0, 0]).p_value == 1.0
    assert sign_test([]).p_value == 1.0


def test_paired_difference_is_reproducible_and_sensible():
    rng = np.random.default_rng(3)
    b = rng.normal(0.6, 0.1, 400)
    c = b + rng.normal(-0.05, 0.05, 400)
    r1 = paired_difference(b, c, seed=7)
    r2 = paired_difference(b, c, seed=7)
    assert r1 == r2  # seeded: the same report every time
    assert r1.n == 400
    assert r1.mean_difference == pytest.approx(float(np.mean(c - b)))
    assert r1.ci_low < r1.mean_difference < r1.ci_high < 0  # a clear loss: the whole interval is negative
    # the percentile bootstrap of a mean is close to the normal interval at this size
    se = float(np.std(c - b, ddof=1) / math.sqrt(400))
    assert r1.ci_low == pytest.approx(r1.mean_difference - 1.96 * se, abs=0.25 * se)
    assert r1.sign_test.losses > r1.sign_test.wins


def test_paired_difference_drops_non_finite_pairs_and_checks_shapes():
    r = paired_difference([1.0, math.nan, 0.5], [2.0, 1.0, math.inf])
    assert r.n == 1 and r.mean_difference == 1.0 and (r.ci_low, r.ci_high) == (1.0, 1.0)
    with pytest.raises(ValueError, match="same length"):
        paired_difference([1.0], [1.0, 2.0])
    empty = paired_difference([], [])
    assert empty.n == 0 and math.isnan(empty.mean_difference)


@given(st.lists(st.floats(min_value=-1, max_value=1), min_size=2, max_size=60), st.integers(0, 1000))
def test_bootstrap_interval_is_ordered_bounded_and_seeded(diffs, seed):
    low, high = bootstrap_mean_ci(diffs, n_resamples=300, seed=seed)
    assert low <= high
    assert min(diffs) - 1e-12 <= low and high <= max(diffs) + 1e-12
    assert bootstrap_mean_ci(diffs, n_resamples=300, seed=seed) == (low, high)


def test_bootstrap_argument_checks():
    with pytest.raises(ValueError, match="confidence"):
        bootstrap_mean_ci([1, 2], confidence=1.5)
    with pytest.raises(ValueError, match="n_resamples"):
        bootstrap_mean_ci([1, 2], n_resamples=0)


def test_distribution_shift_matches_scipy():
    rng = np.random.default_rng(0)
    b, c = rng.normal(0, 1, 800), rng.normal(0.4, 1.2, 600)
    r = distribution_shift(b, c)
    assert r is not None and (r.n_baseline, r.n_candidate) == (800, 600)
    assert r.ks_statistic == pytest.approx(sps.ks_2samp(b, c).statistic)
    assert r.ks_p_value == pytest.approx(sps.ks_2samp(b, c, method="asymp").pvalue, rel=1e-3)
    assert r.wasserstein == pytest.approx(sps.wasserstein_distance(b, c))
    assert distribution_shift([], [1.0]) is None
    assert distribution_shift([math.nan], [1.0]) is None
