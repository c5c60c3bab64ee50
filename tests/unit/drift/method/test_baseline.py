"""The random-effects window comparison (``ragmon.drift.method.baseline``): hand-computed answers, calibration on
independent and on overdispersed windows, seasonality, the guard band and the innovation for correlated windows."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as sp

from ragmon.drift.method.baseline import MAX_RHO, _lag_one, _persistence, _whiten, compare, compare_rows


def test_hand_computed_small_case() -> None:
    # period 1, four reference windows with no sampling noise: the leave-one-out residuals give τ² exactly
    # (reference windows that alternate: no lag-one correlation, so the level itself is tested)
    values = np.array([5.0, 1.0, 4.0, 2.0, 3.0])  # index 0 is the current window
    variances = np.zeros(5)
    b = compare(values, variances, current=0, reference=4, period=1)
    assert not isinstance(b, str)
    # r_w = s_w − mean(others): −5/3·…; E[r²] = τ²(1 + 1/3) ⇒ τ² = Σr² / (4 · 4/3)
    r = np.array([1 - 3, 4 - 2, 2 - 8 / 3, 3 - 7 / 3])
    tau2 = float(np.sum(r ** 2) / (4 * 4 / 3))
    assert b.tau == pytest.approx(math.sqrt(tau2))
    assert b.expected == pytest.approx(2.5) and b.same_slot == 4 and b.windows == 4 and b.rho < 0
    t = (5.0 - 2.5) / math.sqrt(tau2 + tau2 / 4)
    assert b.p_value == pytest.approx(2 * sp.t.sf(t, 3), rel=1e-6)  # df = 4 windows − 1 slot


def test_reasons_when_there_is_nothing_to_compare() -> None:
    nan = np.nan
    assert compare(np.array([nan, 1.0, 2.0]), np.ones(3), current=0, reference=2, period=1) == \
        "the current window has too few traces"
    assert compare(np.array([1.0, 2.0]), np.ones(2), current=0, reference=1, period=1) == \
        "too few reference windows to measure their natural spread"
    # reference windows exist, but none at the current window's time of day
    assert compare(np.array([1.0, 2.0, 3.0]), np.ones(3), current=0, reference=2, period=24) == \
        "no reference window at the current window's time of day"


def _iid_windows(rng: np.random.Generator, windows: int, n: int, tau: float) -> tuple[np.ndarray, np.ndarray]:
    """Window means of n traces (σ = 1) around window effects of sd τ."""
    means = rng.normal(0.0, tau, windows) + rng.normal(0.0, 1 / math.sqrt(n), windows)
    return means, np.full(windows, 1.0 / n)


@pytest.mark.slow
@pytest.mark.parametrize("tau", [0.0, 0.1])
@pytest.mark.parametrize("n", [200, 5000])
def test_calibrated_on_independent_and_overdispersed_windows(tau: float, n: int) -> None:
    rng = np.random.default_rng(11)
    ps = []
    for _ in range(1500):
        values, variances = _iid_windows(rng, 169, n, tau)
        b = compare(values, variances, current=0, reference=168, period=24)
        ps.append(b.p_value)
    ps = np.array(ps)
    # nominal 5 % and 1 %; binomial sd at 1,500 draws ≈ 0.6 and 0.26 points
    assert 0.025 <= np.mean(ps < 0.05) <= 0.075, np.mean(ps < 0.05)
    assert np.mean(ps < 0.01) <= 0.022


def test_a_test_that_counts_traces_alarms_on_overdispersed_windows() -> None:
    """The negative control: the same windows judged by sampling noise alone (τ ignored) alarm far too often —
    the failure the window test exists to fix."""
    rng = np.random.default_rng(12)
    alarms = 0
    for _ in range(500):
        values, variances = _iid_windows(rng, 169, 5000, 0.1)
        z = (values[0] - values[24::24].mean()) / math.sqrt(variances[0] * (1 + 1 / 7))
        alarms += abs(z) > 1.96
    assert alarms / 500 > 0.5


def test_seasonal_baseline_is_the_same_slot() -> None:
    rng = np.random.default_rng(13)
    hours = np.arange(24 * 8)
    daily = np.sin(2 * np.pi * hours / 24)  # index w is w hours before the current window
    values = daily + rng.normal(0, 0.01, hours.size)
    b = compare(values, np.full(hours.size, 1e-4), current=0, reference=168, period=24)
    assert b.same_slot == 7 and b.expected == pytest.approx(0.0, abs=0.01)  # the same hour, not the daily mean
    assert b.p_value > 0.01
    flat = compare(values, np.full(hours.size, 1e-4), current=0, reference=168, period=1)
    assert flat.tau > 0.5  # without slots the daily cycle is counted as spread


def test_guard_band_keeps_a_building_drift_out_of_the_spread() -> None:
    rng = np.random.default_rng(14)
    values, variances = _iid_windows(rng, 169, 1000, 0.0)
    values[:10] += np.linspace(0.5, 0.05, 10)  # a drift that began 10 windows ago and is still growing
    open_ = compare(values, variances, current=0, reference=168, period=24)
    guarded = compare(values, variances, current=0, reference=168, period=24, guard=23)
    assert guarded.tau < open_.tau and guarded.p_value < open_.p_value
    assert guarded.windows == 168 - 23


def test_innovation_for_correlated_windows() -> None:
    """Windows that move together (AR(1), ρ = 0.8): the level test would call the current window unusual as often
    as the walk wanders; the innovation is calibrated, and a sudden jump still stands out."""
    rng = np.random.default_rng(15)
    ps, jumps = [], []
    for _ in range(600):
        e = np.empty(169)
        e[-1] = rng.normal()
        for w in range(167, -1, -1):
            e[w] = 0.8 * e[w + 1] + math.sqrt(1 - 0.64) * rng.normal()
        values = 0.1 * e
        b = compare(values, np.full(169, 1e-6), current=0, reference=168, period=1)
        ps.append(b.p_value)
        assert b.rho > 0.5
        jump = values.copy()
        jump[0] += 0.6
        jumps.append(compare(jump, np.full(169, 1e-6), current=0, reference=168, period=1).p_value)
    assert np.mean(np.array(ps) < 0.05) <= 0.08
    assert np.mean(np.array(jumps) < 0.001) >= 0.9


def test_z_takes_the_innovation_sign_so_consecutive_checks_do_not_lean_together() -> None:
    """The z-score the CUSUM adds up is the innovation's, sign included: a window above its baseline but below what
    the previous window's excursion predicts is evidence of a fall, and the z-scores of consecutive checks on a
    correlated walk without drift are about independent (signed by the raw deviation, they kept one sign for
    as long as the walk stayed on one side: a CUSUM false alarm on every long excursion)."""
    rng = np.random.default_rng(17)
    e = np.empty(168 + 400)
    e[-1] = rng.normal()
    for w in range(e.size - 2, -1, -1):
        e[w] = 0.9 * e[w + 1] + math.sqrt(1 - 0.81) * rng.normal()
    values, variances = 0.1 * e, np.full(e.size, 1e-6)
    zs = np.array([compare(values, variances, current=c, reference=168, period=1).z for c in range(400)])
    assert abs(np.corrcoef(zs[1:], zs[:-1])[0, 1]) < 0.2
    assert np.mean(np.sign(zs[1:]) == np.sign(zs[:-1])) < 0.65
    falls = values.copy()
    falls[1], falls[0] = falls[2:].mean() + 0.3, falls[2:].mean() + 0.1  # still above the baseline, but falling
    b = compare(falls, variances, current=0, reference=168, period=1)
    assert not isinstance(b, str) and b.value > b.expected and b.rho > 0.5 and b.z < -1


def test_persistence_is_the_variance_of_a_day_of_innovations() -> None:
    """Innovations that lean the same way for half a day (a 12-window moving sum of white noise): a sum of 24 of
    them varies about 8 times more than 24 independent ones would (capped at 10); six lags saw under 6 of it.
    White innovations: about 1, taken one standard error of the estimate (√(4·24 / (3·168)) ≈ 0.44) higher."""
    rng = np.random.default_rng(18)
    ratios = []
    for _ in range(40):
        z = np.convolve(rng.normal(size=168 + 11), np.ones(12), "valid") / math.sqrt(12)
        ratios.append(_persistence(z[None, :])[0])
    assert np.median(ratios) > 7
    white = [_persistence(rng.normal(size=(1, 168)))[0] for _ in range(40)]
    assert 1.3 < np.median(white) < 1.7


@settings(max_examples=60, deadline=None)
@given(st.floats(-3, 3), st.floats(0.0, 2.0))
def test_z_moves_with_the_current_value(shift: float, extra: float) -> None:
    rng = np.random.default_rng(16)
    values, variances = _iid_windows(rng, 49, 500, 0.05)
    lo, hi = values.copy(), values.copy()
    lo[0], hi[0] = shift, shift + extra + 1e-3
    a = compare(lo, variances, current=0, reference=48, period=1)
    b = compare(hi, variances, current=0, reference=48, period=1)
    assert b.z >= a.z and 0.0 <= a.p_value <= 1.0


def _trending_windows(rng: np.random.Generator, windows: int, n: int, tau: float, phi: float,
                      innovations: str = "normal") -> tuple[np.ndarray, np.ndarray]:
    """Window means (newest first) whose effects walk for hours — AR(1) with coefficient ``phi`` per window, the
    way popular queries trend — plus sampling noise of n traces (σ = 1); ``innovations`` ``t3`` for jumps."""
    burn = 200
    shocks = (rng.standard_t(3, windows + burn) / math.sqrt(3) if innovations == "t3"
              else rng.normal(size=windows + burn))
    effect = np.zeros(windows + burn)
    for i in range(1, effect.size):
        effect[i] = phi * effect[i - 1] + math.sqrt(1 - phi * phi) * shocks[i]
    means = tau * effect[burn:][::-1] + rng.normal(0.0, 1 / math.sqrt(n), windows)
    return means, np.full(windows, 1.0 / n)


@pytest.mark.slow
@pytest.mark.parametrize("innovations", ["normal", "t3"])
def test_calibrated_when_windows_trend_for_hours(innovations: str) -> None:
    """Effects that persist for a day (φ = 0.95 an hour) under sampling noise that hides most of it from the
    lag-one correlation, with normal or heavy-tailed (t₃) jumps: each draw is a fresh week, so a spread estimate
    that is noisier than its window count suggests shows as too many small p-values. The degrees of freedom
    count the autocorrelation over a day of lags, and the tails are read from the innovations."""
    rng = np.random.default_rng(23)
    ps = []
    for _ in range(1500):
        values, variances = _trending_windows(rng, 169, 1000, 0.05, 0.95, innovations)
        b = compare(values, variances, current=0, reference=168, period=24)
        ps.append(b.p_value)
    ps = np.array(ps)
    # what the check's Benjamini–Hochberg step over some 50 tests reads is the small p-values (the code before
    # 2026-12-03 gave 1.5–1.7 % under 0.01 with t₃ jumps); at 5 % a unit-variance t is narrower than t₃ data
    assert np.mean(ps < 0.05) <= 0.075, np.mean(ps < 0.05)
    assert np.mean(ps < 0.01) <= 0.013, np.mean(ps < 0.01)
    assert np.mean(ps < 0.001) <= 0.002, np.mean(ps < 0.001)


def test_windows_that_move_exactly_together_do_not_divide_by_zero() -> None:
    # residuals all alike over consecutive windows: a lag-one correlation of exactly 1 before the clip
    rho = _lag_one(np.ones((1, 6)))
    assert rho[0] == MAX_RHO < 1
    assert np.all(np.isfinite(_whiten(np.ones((1, 6)), rho)[:, :-1]))


def test_windows_compared_together_are_each_compared_alone() -> None:
    """``compare_rows`` (the CUSUM's look-back, a day of windows at once) gives each row what ``compare`` gives it:
    trending windows with gaps, a seasonal period, a guard, current windows near the series' end (fewer reference
    windows) and ones with nothing to compare."""
    rng = np.random.default_rng(31)
    values, variances = _trending_windows(rng, 200, 300, 0.05, 0.9)
    values[rng.uniform(size=200) < 0.15] = np.nan
    currents = [0, 1, 5, 23, 24, 60, 150, 190, 199]
    for period, guard in ((24, 0), (24, 11), (1, 3), (7, 0)):
        rows = compare_rows(np.tile(values, (len(currents), 1)), np.tile(variances, (len(currents), 1)), currents,
                            reference=168, period=period, guard=guard)
        for current, row in zip(currents, rows, strict=True):
            alone = compare(values, variances, current=current, reference=168, period=period, guard=guard)
            assert row == alone, (period, guard, current)
    assert any(isinstance(r, str) for r in rows) and any(not isinstance(r, str) for r in rows)
