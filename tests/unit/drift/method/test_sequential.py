"""The CUSUM (``ragmon.drift.method.sequential``): Siegmund's ARL against a simulation, the threshold from a budget,
accumulation and whitening."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ragmon.drift.method.sequential import arl0, budget_arl0, cusum, threshold


def _run_length(rng: np.random.Generator, k: float, h: float, limit: int = 100_000) -> int:
    up = down = 0.0
    for t in range(1, limit + 1):
        z = rng.normal()
        up, down = max(0.0, up + z - k), max(0.0, down - z - k)
        if max(up, down) >= h:
            return t
    return limit


def test_siegmund_arl_matches_simulation() -> None:
    rng = np.random.default_rng(21)
    k, h = 1.0, 2.5
    simulated = np.mean([_run_length(rng, k, h) for _ in range(600)])
    assert simulated == pytest.approx(arl0(k, h), rel=0.15)


def test_threshold_inverts_the_arl_and_grows_with_the_budget() -> None:
    for target in (100.0, 5_000.0, 1e6):
        assert arl0(1.0, threshold(1.0, target)) == pytest.approx(target, rel=1e-4)
    # 40 series, 24 windows a day, 0.1 false alarms a day: each series may alarm once in 9,600 windows
    target = budget_arl0(40, 24, 0.1)
    assert target == 9_600
    assert threshold(1.0, target) > threshold(1.0, budget_arl0(40, 24, 1.0))
    with pytest.raises(ValueError):
        budget_arl0(0, 24, 0.1)


def test_cusum_accumulates_a_persistent_shift_and_ignores_a_blip() -> None:
    h = threshold(1.0, 9_600)
    persistent = cusum([0.1, -0.3, 2.6, 2.5, 2.7], k=1.0, h=h)
    assert persistent.alarm and persistent.direction == "up" and persistent.windows == 5
    blip = cusum([0.1, 3.0, -0.5, 0.2, -0.1], k=1.0, h=h)
    assert not blip.alarm
    big = cusum([0.0, -9.0], k=1.0, h=h)
    assert big.alarm and big.direction == "down"
    assert cusum([math.nan, math.inf], k=1.0, h=h).alarm  # an exact, noise-free jump
    assert cusum([math.nan, math.nan], k=1.0, h=h).windows == 0


def test_whitening_does_not_add_up_the_same_evidence_twice() -> None:
    rng = np.random.default_rng(22)
    h = threshold(0.5, 2_000)
    raw = whitened = 0
    for _ in range(300):
        e = np.empty(48)
        e[0] = rng.normal()
        for t in range(1, 48):
            e[t] = 0.8 * e[t - 1] + 0.6 * rng.normal()
        raw += cusum(e, k=0.5, h=h).alarm
        whitened += cusum(e, k=0.5, h=h, rho=0.8).alarm
    assert whitened < raw / 3
