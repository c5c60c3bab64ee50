"""Persistence at a fixed false-alarm budget: a two-sided CUSUM over the windows' z-scores.

One window's test catches a large shift at once; a small shift that persists is caught by accumulating the
evidence of consecutive windows. Page's CUSUM does this optimally for a shift of ``2k`` standard deviations:

    S⁺_t = max(0, S⁺_{t−1} + ε_t − k),   S⁻_t = max(0, S⁻_{t−1} − ε_t − k),   alarm when max(S⁺, S⁻) ≥ h

``ε_t`` are the window tests' z-scores (``ragmon.drift.method.baseline``), pre-whitened when consecutive windows move
together (``ε_t = (z_t − ρ z_{t−1}) / √(1 − ρ²)`` for a lag-one correlation ρ > 0): popular queries that trend
for hours make neighbouring windows alike, and a CUSUM fed correlated z-scores would add up the same evidence
twice. After whitening a persistent shift δ contributes δ/√(1−ρ²) in its first window and δ√((1−ρ)/(1+ρ)) in
each later one.

The threshold ``h`` comes from a budget of false alarms per day: with ``series`` monitored series and
``windows_per_day`` windows each, one series may false-alarm once every ``series · windows_per_day / budget``
windows (its in-control average run length, ARL₀). Siegmund's approximation for a one-sided CUSUM of unit
normal increments, ``ARL₀⁺ ≈ (e^{2kb} − 2kb − 1) / (2k²)`` with ``b = h + 1.166``, halved for two sides, is
solved for ``h``. The CUSUM is recomputed at every check from the last ``lookback`` windows (stateless, so a
check at a past time or a backtest gives the same answer as the live check did); starting from zero a
``lookback`` ago can only lower the false-alarm rate.

Pure: no I/O, no clock.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from scipy.optimize import brentq

#: Siegmund's correction for the overshoot of a normal random walk over the threshold
_OVERSHOOT = 1.166


@dataclass(frozen=True, slots=True)
class Cusum:
    """The CUSUM after the newest window, with the parameters that produced it."""

    upper: float    # S⁺: evidence of an increase
    lower: float    # S⁻: evidence of a decrease
    k: float
    h: float
    rho: float      # the lag-one correlation the increments were whitened with
    windows: int    # z-scores accumulated
    upper_run: int = 0  # windows since S⁺ was last 0 (the estimated change point of an increase: the run's start)
    lower_run: int = 0  # ... since S⁻ was

    @property
    def statistic(self) -> float:
        return max(self.upper, self.lower)

    @property
    def run(self) -> int:
        """Windows since the larger side was last 0: how long ago the shift it accumulates began (the CUSUM's
        change-point estimate), counting the current window."""
        return self.upper_run if self.upper >= self.lower else self.lower_run

    @property
    def alarm(self) -> bool:
        return self.statistic >= self.h

    @property
    def direction(self) -> str:
        return "up" if self.upper >= self.lower else "down"


def arl0(k: float, h: float) -> float:
    """Approximate in-control average run length (windows) of a two-sided CUSUM of N(0, 1) increments."""
    if k <= 0 or h < 0:
        raise ValueError(f"need k > 0 and h ≥ 0, got k={k}, h={h}")
    x = 2 * k * (h + _OVERSHOOT)
    one_sided = (math.expm1(x) - x) / (2 * k * k) if x < 700 else math.inf
    return one_sided / 2


def threshold(k: float, target_arl0: float) -> float:
    """The ``h`` whose two-sided ARL₀ is ``target_arl0`` windows."""
    if target_arl0 <= arl0(k, 0.0):
        return 0.0
    hi = 1.0
    while arl0(k, hi) < target_arl0:
        hi *= 2
    return float(brentq(lambda h: arl0(k, h) - target_arl0, 0.0, hi, xtol=1e-6))


def budget_arl0(series: int, windows_per_day: float, false_alarms_per_day: float) -> float:
    """ARL₀ each series needs so that ``series`` of them, ``windows_per_day`` windows a day each, raise
    ``false_alarms_per_day`` false alarms a day together."""
    if series < 1 or windows_per_day <= 0 or false_alarms_per_day <= 0:
        raise ValueError("need series ≥ 1, windows_per_day > 0 and false_alarms_per_day > 0")
    return series * windows_per_day / false_alarms_per_day


def cusum(z_oldest_first: Sequence[float], *, k: float, h: float, rho: float = 0.0,
          clip: float = math.inf) -> Cusum:
    """Run the CUSUM over z-scores, oldest first; non-finite z-scores (windows without a test) are skipped
    and break the whitening chain. Each increment is clipped to ``±clip``."""
    rho = min(max(rho, 0.0), 0.95)
    scale = math.sqrt(1 - rho * rho)
    upper = lower = 0.0
    upper_run = lower_run = 0
    previous: float | None = None
    used = 0
    for z in z_oldest_first:
        upper_run, lower_run = upper_run + 1 if upper > 0 else 0, lower_run + 1 if lower > 0 else 0
        if not math.isfinite(z):
            if z in (math.inf, -math.inf):  # an exact zero-variance jump: overwhelming evidence
                upper, lower = (math.inf, lower) if z > 0 else (upper, math.inf)
                used += 1
            previous = None
            upper_run, lower_run = max(upper_run, 1 if upper > 0 else 0), max(lower_run, 1 if lower > 0 else 0)
            continue
        eps = z if previous is None or rho == 0 else (z - rho * previous) / scale
        eps = min(max(eps, -clip), clip)
        previous = z
        upper = max(0.0, upper + eps - k)
        lower = max(0.0, lower - eps - k)
        upper_run, lower_run = max(upper_run, 1) if upper > 0 else 0, max(lower_run, 1) if lower > 0 else 0
        used += 1
    return Cusum(upper, lower, k, h, rho, used, upper_run, lower_run)
