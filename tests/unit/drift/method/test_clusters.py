"""The current window's questions as clusters (``summary.clustered_variance``, ``Series.design_effect``,
``window_tests._deff``): a burst of a few new questions, each asked many times with a deviation of its own, widens
the window tests; a shift common to every question does not; traffic that never repeats a question is as before."""

from __future__ import annotations

import numpy as np
import pytest

from ragmon.drift.method.comparison import Comparison
from ragmon.drift.method.series import Series
from ragmon.drift.method.summary import ContinuousSummary, clustered_variance
from ragmon.drift.method.window_tests import window_mean, window_quantiles

HOURS, PER_HOUR = 169, 1000


def test_distinct_questions_give_the_independent_variance() -> None:
    x = np.random.default_rng(1).normal(0.6, 0.1, 500)
    assert clustered_variance(x, np.arange(500)) == pytest.approx(x.var() / 500)


def test_a_question_whose_values_share_a_deviation_counts_as_one() -> None:
    rng = np.random.default_rng(2)
    keys = np.repeat(np.arange(50), 10)
    shared = np.repeat(rng.normal(0, 0.1, 50), 10) + rng.normal(0, 0.01, 500)
    assert clustered_variance(shared, keys) > 5 * shared.var() / 500  # about n_q times the independent variance
    same = np.full(500, 0.7)  # no deviation at all: nothing to count
    assert clustered_variance(same, keys) == pytest.approx(0.0, abs=1e-15)


def _series(current: np.ndarray, keys: np.ndarray | None, rng: np.random.Generator) -> Series:
    """A current window and 168 reference windows of independent traces around 0.6 (σ 0.1)."""
    windows = [ContinuousSummary.from_samples(current, keys=keys)]
    windows += [ContinuousSummary.from_samples(rng.normal(0.6, 0.1, PER_HOUR)) for _ in range(HOURS - 1)]
    return Series.from_summaries(windows)


def _burst(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """An hour whose 15 % come from 20 new questions with levels of their own (σ 0.08 between them)."""
    n_burst = 150
    keys = np.concatenate([np.arange(1000, 1000 + PER_HOUR - n_burst), rng.integers(0, 20, n_burst)])
    levels = rng.normal(0, 0.08, 20)
    values = rng.normal(0.6, 0.1, PER_HOUR)
    values[-n_burst:] += levels[keys[-n_burst:]]
    return values, keys


def test_a_burst_of_new_questions_widens_the_test() -> None:
    rng = np.random.default_rng(3)
    values, keys = _burst(rng)
    clustered = _series(values, keys, np.random.default_rng(4))
    independent = _series(values, None, np.random.default_rng(4))
    assert clustered.design_effect()[0] > 1.5 and (clustered.design_effect()[1:] == 1).all()
    for test in (window_mean, window_quantiles):
        wide, narrow = test(Comparison(clustered, period=24)), test(Comparison(independent, period=24))
        assert abs(wide.statistic) < abs(narrow.statistic) / 1.2


def test_a_shift_of_every_question_is_not_widened() -> None:
    rng = np.random.default_rng(5)
    keys = rng.integers(0, 300, PER_HOUR)  # popular questions repeat, with no deviation of their own
    values = rng.normal(0.6 - 0.02, 0.1, PER_HOUR)  # an incident: every question 0.2σ lower
    series = _series(values, keys, np.random.default_rng(6))
    assert series.design_effect()[0] < 1.3
    with_clusters = window_mean(Comparison(series, period=24))
    without = window_mean(Comparison(_series(values, None, np.random.default_rng(6)), period=24))
    assert with_clusters.p_value < 1e-4 and abs(with_clusters.statistic) > 0.9 * abs(without.statistic)
