"""The window rate test's beta-binomial tails against the whole pmf summed directly, for counts of every size a check
meets (scipy's ``sf`` is one minus its ``cdf``, good to about 1e-9 at a million trials: not a reference for far
tails)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from ragmon.drift.method import window_tests
from ragmon.drift.method.window_tests import _count_tails


def _whole(n: int, mu: float, size: float, k: int) -> tuple[float, float, float]:
    pmf = np.exp(stats.betabinom(n, mu * size, (1 - mu) * size).logpmf(np.arange(n + 1)))
    return float(pmf[:k].sum()), float(pmf[k]), float(pmf[k + 1:].sum())


@pytest.mark.parametrize(("n", "mu", "size"), [
    (30, 0.1, 5.0),            # a small window, a wide spread between windows
    (200, 0.01, 400.0),        # a rare event
    (5_000, 0.02, 0.5),        # a share whose beta is J-shaped (a < 1): the mass piles up at 0
    (5_000, 0.98, 0.5),        # ... and at n
    (1_000_000, 0.01, 1e5),    # an adjusted count of a window at 10 M traces: the pmf is summed over a span
    (1_000_000, 0.4, 1e7),
])
def test_the_tails_are_the_whole_pmfs_in_the_bulk_and_far_out(n: int, mu: float, size: float) -> None:
    dist = stats.betabinom(n, mu * size, (1 - mu) * size)
    mean, sd = dist.mean(), dist.std()
    ks = sorted({0, max(0, int(mean - 5 * sd)), int(mean), min(n, int(mean + 8 * sd)), min(n, int(mean + 100 * sd)),
                 n})
    for k in ks:  # one count a call, as a check asks (asking for 0 and n together would span every count)
        for got in (_count_tails((k,), n, mu, size)[0], _count_tails((k, min(k + 1, n)), n, mu, size)[0]):
            for value, expected in zip(got, _whole(n, mu, size, k), strict=True):
                assert value == pytest.approx(expected, rel=1e-6, abs=1e-300)
            assert sum(got) == pytest.approx(1.0, abs=1e-8)


def test_a_count_near_the_mean_of_a_million_trials_reads_a_span_not_every_count(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The point of the span: the pmf of an adjusted count at 10 M traces is not computed over a million counts."""
    sizes: list[int] = []
    real = window_tests._beta_binomial_pmf
    monkeypatch.setattr(window_tests, "_beta_binomial_pmf", lambda j, *rest: (sizes.append(j.size), real(j, *rest))[1])
    _count_tails((10_000, 10_001), 1_000_000, 0.01, 1e5)
    assert sizes and max(sizes) < 100_000
