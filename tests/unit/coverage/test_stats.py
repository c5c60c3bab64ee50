"""Coverage statistics: known answers by hand and against SciPy, properties with Hypothesis, the decision."""

from __future__ import annotations

import math

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st
from scipy.stats import chi2

from ragmon.coverage.stats import (
    DIVERGED,
    MATCHES,
    NO_GOLDEN,
    TOO_SMALL,
    CoverageThresholds,
    compare_stratum,
    g_test,
    shares_of,
    total_variation,
)

TYPES = ("single-fact", "table-number", "out-of-scope", "other")


def test_g_test_known_answer_by_hand() -> None:
    golden, traffic = {"a": 30, "b": 10}, {"a": 60, "b": 100}
    table = [[30, 10], [60, 100]]
    n = 200
    rows, cols = [sum(r) for r in table], [sum(c) for c in zip(*table, strict=True)]
    g = 2 * sum(o * math.log(o / (rows[i] * cols[j] / n)) for i, r in enumerate(table) for j, o in enumerate(r))
    pearson = sum((o - rows[i] * cols[j] / n) ** 2 / (rows[i] * cols[j] / n)
                  for i, r in enumerate(table) for j, o in enumerate(r))
    stat, p, v = g_test(golden, traffic)
    assert stat == pytest.approx(g)
    assert p == pytest.approx(chi2.sf(g, 1))
    assert v == pytest.approx(math.sqrt(pearson / n))


def test_total_variation_by_hand() -> None:
    shares = shares_of({"a": 3, "b": 1}, {"a": 1, "b": 1, "c": 2}, ("a", "b", "c"))
    # golden (0.75, 0.25, 0), traffic (0.25, 0.25, 0.5): half of 0.5 + 0 + 0.5
    assert total_variation(shares) == pytest.approx(0.5)


def test_new_type_in_traffic_diverges_and_is_named() -> None:
    golden = {"single-fact": 40, "out-of-scope": 10}
    traffic = {"single-fact": 300, "out-of-scope": 80, "table-number": 250}
    result = compare_stratum("consent", golden, traffic, TYPES, CoverageThresholds())
    assert result.status == DIVERGED
    assert result.under_represented == ("table-number",)
    assert result.distance == pytest.approx(250 / 630)
    assert result.p_value < 1e-6


def test_same_mix_matches() -> None:
    result = compare_stratum("s", {"single-fact": 40, "out-of-scope": 10}, {"single-fact": 410, "out-of-scope": 95},
                             TYPES, CoverageThresholds())
    assert result.status == MATCHES and result.under_represented == ()


def test_large_distance_without_evidence_is_not_diverged() -> None:
    # a 3-case golden set cannot show a difference: the test, not only the distance, must agree
    result = compare_stratum("s", {"single-fact": 3}, {"single-fact": 30, "table-number": 30}, TYPES,
                             CoverageThresholds(alpha=0.001))
    assert result.distance == pytest.approx(0.5) and result.p_value > 0.001
    assert result.status == MATCHES


def test_too_small_and_no_golden() -> None:
    t = CoverageThresholds(min_traces=50)
    assert compare_stratum("s", {"single-fact": 5}, {"table-number": 10}, TYPES, t).status == TOO_SMALL
    missing = compare_stratum("s", {}, {"table-number": 60, "single-fact": 20}, TYPES, t)
    assert missing.status == NO_GOLDEN and missing.under_represented == ("table-number", "single-fact")
    # nothing to compare with: no distance and no test, never the 0 and p = 1 of a perfect match
    assert all(math.isnan(x) for x in (missing.distance, missing.p_value, missing.cramers_v, missing.g_statistic))
    assert compare_stratum("s", {}, {"table-number": 10}, TYPES, t).status == TOO_SMALL


counts = st.dictionaries(st.sampled_from(TYPES), st.integers(0, 10_000), max_size=4)


@given(counts, counts)
def test_statistics_stay_in_range(golden: dict, traffic: dict) -> None:
    result = compare_stratum("s", golden, traffic, TYPES, CoverageThresholds())
    if not sum(golden.values()) or not sum(traffic.values()):
        assert math.isnan(result.distance) and math.isnan(result.p_value)
        return
    assert 0.0 <= result.distance <= 1.0
    assert 0.0 <= result.p_value <= 1.0
    assert 0.0 <= result.cramers_v <= 1.0
    assert result.g_statistic >= 0.0 or math.isclose(result.g_statistic, 0.0, abs_tol=1e-9)
    assert set(result.under_represented) <= set(TYPES)


@given(counts, st.integers(1, 50))
def test_identical_shares_have_zero_distance(golden: dict, scale: int) -> None:
    assume(sum(golden.values()) > 0)  # two empty sides: nothing to compare (NaN, tested above)
    traffic = {k: v * scale for k, v in golden.items()}
    result = compare_stratum("s", golden, traffic, TYPES, CoverageThresholds(min_traces=1))
    assert result.distance == pytest.approx(0.0, abs=1e-12)
    assert result.status != DIVERGED
