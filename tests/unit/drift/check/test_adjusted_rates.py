"""A rate adjusted for the question from what the drift query returns per window — (traces, count as served,
adjusted count, Σ d²) — is the count and sampling variance ``ragmon.drift.simulation.by_query`` defines on the traces
themselves: ``Σ (x − level + M)`` and ``Σ level(1 − level)``, M the reference share (``query.adjusted_rates``)."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import pytest

from ragmon.config import DriftWindowSettings
from ragmon.drift.check.window_queries import adjusted_rates
from ragmon.drift.method.windows import plan

NOW = datetime(2026, 12, 5, 12, 0, tzinfo=UTC)


def test_the_windows_sums_give_each_traces_level_variance() -> None:
    rng = np.random.default_rng(3)
    wp = plan(DriftWindowSettings(reference_days=1), NOW, lookback=2)
    windows = range(wp.history)
    x = {w: (rng.random(rng.integers(40, 120)) < 0.2).astype(float) for w in windows}
    m = sum(x[w].sum() for w in windows if 1 <= w <= wp.reference) / sum(x[w].size for w in windows
                                                                          if 1 <= w <= wp.reference)
    # each trace's question level: a question seen often enough (always empty, never, or in between), or none
    level = {w: np.where(rng.random(v.size) < 0.7, rng.choice([0.0, 1.0, 0.15, 0.6], v.size), np.nan)
             for w, v in x.items()}
    d = {w: np.where(np.isfinite(level[w]), level[w] - m, 0.0) for w in windows}
    by_w = {w: (x[w].size, float(x[w].sum()), float((x[w] - d[w]).sum()), float((d[w] ** 2).sum())) for w in windows}
    got = adjusted_rates(by_w, wp)
    for w in windows:
        p = np.where(np.isfinite(level[w]), level[w], m)
        assert got[w].n == x[w].size
        assert got[w].k == pytest.approx(float((x[w] - p + m).sum()), rel=1e-12)
        assert got[w].var == pytest.approx(float((p * (1 - p)).sum()), rel=1e-12)
    # a window of questions that always return nothing, or never do, varies by nothing
    always = adjusted_rates({**by_w, 0: (3, 3.0, 3.0 - 3 * (1 - m), 3 * (1 - m) ** 2)}, wp)
    assert always[0].var == pytest.approx(0.0, abs=1e-12)


def test_without_reference_traffic_the_counts_are_as_served() -> None:
    wp = plan(DriftWindowSettings(reference_days=1), NOW, lookback=0)
    got = adjusted_rates({0: (10, 4.0, 4.0, 0.0)}, wp)
    assert (got[0].n, got[0].k, got[0].var) == (10, 4.0, None)
