"""A/B intervals: Newcombe's published example, Welch against SciPy, and the verdict rules."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy.stats import ttest_ind

from ragmon.ab.compare import judge
from ragmon.ab.stats import Delta, mean_delta, rate_delta


def test_newcombe_method_10_published_example() -> None:
    # Newcombe (1998), Statistics in Medicine 17:873, table II, method 10: 56/70 − 48/80 = 0.2 (0.0524, 0.3339)
    d = rate_delta(48, 80, 56, 70)
    assert d.delta == pytest.approx(0.2)
    assert d.low == pytest.approx(0.0524, abs=1e-4) and d.high == pytest.approx(0.3339, abs=1e-4)
    # and 0/10 − 0/10 (−0.2775, 0.2775), where the Wald interval collapses to a point
    zero = rate_delta(0, 10, 0, 10)
    assert (zero.low, zero.high) == pytest.approx((-0.2775, 0.2775), abs=1e-4)


def test_welch_matches_scipy() -> None:
    a, b = [1.0, 2.5, 3.1, 4.8, 2.2, 3.3], [2.9, 4.1, 5.5, 3.8, 6.0]
    d = mean_delta(a, b, 0.9)
    ci = ttest_ind(b, a, equal_var=False).confidence_interval(0.9)
    assert (d.low, d.high) == pytest.approx((ci.low, ci.high))


@given(st.integers(0, 500), st.integers(1, 500), st.integers(0, 500), st.integers(1, 500))
def test_rate_interval_contains_the_estimate_and_stays_in_range(k1: int, n1: int, k2: int, n2: int) -> None:
    k1, k2 = min(k1, n1), min(k2, n2)
    d = rate_delta(k1, n1, k2, n2)
    assert -1.0 <= d.low <= d.delta + 1e-12 and d.delta - 1e-12 <= d.high <= 1.0


def _d(delta: float, low: float, high: float) -> Delta:
    return Delta(0.1, 0.1 + delta, 500, 500, delta, low, high, 0.95)


def test_verdict_directions_and_tolerance() -> None:
    assert judge("reformulated", _d(0.1, 0.05, 0.15), 0.02).status == "harm"       # more reformulation: worse
    assert judge("resolved", _d(0.1, 0.05, 0.15), 0.02).status == "ok"             # more resolved: better
    assert judge("resolved", _d(-0.1, -0.15, -0.05), 0.02).status == "harm"
    assert judge("escalated", _d(0.0, -0.01, 0.015), 0.02).status == "ok"          # within tolerance
    assert judge("escalated", _d(0.0, -0.03, 0.03), 0.02).status == "inconclusive"
    assert judge("latency_ms", _d(80.0, 60.0, 100.0), 50.0).status == "harm"
    assert judge("faithfulness", _d(math.nan, math.nan, math.nan), 0.02).status == "no_data"


@pytest.mark.parametrize("text", ["hybrid@", "@v1", "hybrid@v1@x", "", " hybrid@v1"])
def test_an_arm_that_is_not_name_or_name_at_version_is_refused(text: str) -> None:
    from ragmon.ab.compare import Arm

    with pytest.raises(ValueError, match="NAME@VERSION"):
        Arm.parse(text, "canary")
    assert Arm.parse("hybrid@v1", "canary").version == "v1" and Arm.parse("hybrid", "canary").version is None
