"""The window tests of many windows at once (``DriftTest.run_rows``, the CUSUM's look-back) against each window
tested alone (``DriftTest.run``)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ragmon.drift.method.comparison import Comparison
from ragmon.drift.method.comparison import TestOutcome as Outcome
from ragmon.drift.method.registry import NotTestable, get_test
from ragmon.drift.method.series import Series
from ragmon.drift.method.summary import ContinuousSummary, RateSummary

WINDOWS = 200


def _continuous(rng: np.random.Generator) -> Series:
    """Hourly windows whose level walks (trending questions), with quiet hours and a few empty windows."""
    level, windows = 0.0, []
    for w in range(WINDOWS):
        level = 0.9 * level + rng.normal(0, 0.02)
        n = 0 if w % 37 == 5 else int(rng.integers(10, 120))
        windows.append(ContinuousSummary.from_samples(rng.normal(0.6 + level, 0.1, n)))
    return Series.from_summaries(windows)


def _rates(rng: np.random.Generator, adjusted: bool) -> Series:
    windows = []
    for w in range(WINDOWS):
        n = 0 if w % 41 == 3 else int(rng.integers(5, 150))
        k = float(rng.binomial(n, 0.04 + 0.02 * math.sin(w / 24 * 2 * math.pi)))
        windows.append(RateSummary(n, k - rng.uniform(0, 0.5) * (k > 0), n * 0.03) if adjusted else RateSummary(n, k))
    return Series.from_summaries(windows)


def _same(row: Outcome | NotTestable, alone: Outcome | NotTestable) -> bool:
    if isinstance(alone, NotTestable) or isinstance(row, NotTestable):
        return type(row) is type(alone) and str(row) == str(alone)
    return (row.statistic, row.p_value, row.effect) == (alone.statistic, alone.p_value, alone.effect) \
        and row.details == alone.details


def _alone(test: str, c: Comparison) -> Outcome | NotTestable:
    try:
        return get_test(test).run(c)
    except NotTestable as e:
        return e


@pytest.mark.parametrize(("test", "series"), [
    ("window_mean", "continuous"), ("window_median", "continuous"), ("window_rate", "rates"),
    ("window_rate", "adjusted rates")])
@pytest.mark.parametrize("guard", [0, 11])
def test_a_day_of_windows_tested_together_as_each_alone(test: str, series: str, guard: int) -> None:
    rng = np.random.default_rng(7)
    s = _continuous(rng) if series == "continuous" else _rates(rng, series == "adjusted rates")
    # the look-back's windows, newest first, and windows near the series' end that have fewer reference windows
    currents = [*range(24), 120, 180, 198, 199]
    cs = [Comparison(s, c, 168, 24, min_window=15, guard=guard) for c in currents]
    rows = get_test(test).run_rows(cs)
    assert len(rows) == len(cs)
    for c, row in zip(cs, rows, strict=True):
        assert _same(row, _alone(test, c)), (test, c.current)
    # some windows are testable and some are not (an empty window, the series' end): neither hides the other
    assert any(isinstance(r, NotTestable) for r in rows) and any(not isinstance(r, NotTestable) for r in rows)


def test_a_test_without_rows_of_its_own_runs_each_window() -> None:
    s = _continuous(np.random.default_rng(9))
    cs = [Comparison(s, c, 168, 24) for c in (0, 1, 2)]
    rows = get_test("ks").run_rows(cs)
    assert all(_same(row, _alone("ks", c)) for c, row in zip(cs, rows, strict=True))


def test_windows_tested_together_share_their_reference() -> None:
    s = _continuous(np.random.default_rng(8))
    with pytest.raises(ValueError, match="share"):
        get_test("window_mean").run_rows([Comparison(s, 0, 168, 24), Comparison(s, 1, 120, 24)])
    with pytest.raises(ValueError, match="applies to"):
        get_test("window_rate").run_rows([Comparison(s, 0, 168, 24)])
