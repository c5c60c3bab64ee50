"""Cost metrics: percentiles against NumPy, per-stratum grouping, bad input."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ragmon.metrics import CostRecord, cost_by_stratum, mean_defined, percentile, score_ranking


@given(st.lists(st.floats(-1e6, 1e6), min_size=1, max_size=60), st.floats(0, 100))
def test_percentile_matches_numpy(values: list[float], q: float) -> None:
    assert percentile(values, q) == pytest.approx(float(np.percentile(values, q)), rel=1e-9, abs=1e-6)


def test_percentile_edges() -> None:
    assert percentile([], 50) is None
    assert percentile([1, 2], 50) == 1.5
    with pytest.raises(ValueError, match="q must be"):
        percentile([1], 101)
    with pytest.raises(ValueError, match="finite"):
        percentile([1, float("nan"), 3], 50)


def test_cost_by_stratum() -> None:
    records = [
        CostRecord("billing", 100, 20, 0.01, 120.0),
        CostRecord("billing", 300, 40, 0.03, 80.0),
        CostRecord("ALL", 10, 0, 0.0, None),  # a stratum called ALL does not collide with the overall summary
    ]
    report = cost_by_stratum(records)
    billing = report.strata["billing"]
    assert (billing.n, billing.tokens_total, billing.latency_p50_ms) == (2, 460, 100.0)
    assert billing.cost_usd_mean == pytest.approx(0.02)
    assert report.strata["ALL"].latency_p50_ms is None and report.strata["ALL"].latency_n == 0
    assert report.overall.n == 3 and report.overall.tokens_total == 470
    with pytest.raises(ValueError, match="cost_usd"):
        cost_by_stratum([CostRecord("x", cost_usd=float("inf"))])


def test_mean_defined_skips_none() -> None:
    assert mean_defined([None, 1.0, 0.0, None]) == 0.5
    assert mean_defined([None]) is None
    assert mean_defined([]) is None


def test_score_ranking_bundle() -> None:
    scores = score_ranking(["x", "a", "x", "b"], {"a": 3, "b": 1, "z": 0}, k=2, depth=3)
    assert scores.recall_at_k == 0.5 and scores.recall_at_depth == 1.0
    assert scores.reciprocal_rank_at_k == 0.5 and scores.first_correct_rank == 2
    late = score_ranking(["x", "y", "a"], {"a": 3}, k=2, depth=3)
    assert late.reciprocal_rank_at_k == 0.0 and late.first_correct_rank == 3  # MRR reads at k, not at depth
    with pytest.raises(ValueError, match="depth must be >= k"):
        score_ranking([], {"a": 1}, k=5, depth=3)
