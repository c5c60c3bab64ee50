"""The window tests: the current window against the natural spread of its reference windows.

Each function takes a ``Comparison`` and returns a ``TestOutcome`` (statistic = the z-score, p-value from the
random-effects model of ``ragmon.drift.baseline``, effect size); the registry (``ragmon.drift.registry``)
holds them with their default thresholds.

* ``window_mean`` — a continuous feature's window mean; sampling variance = the traces' within-window
  variance (pooled over the reference) / n. Effect: |shift| in reference standard deviations.
* ``window_quantiles`` — its 10th, 50th and 90th percentiles (a heavier tail or a new mode that barely moves
  the mean); sampling variance of a quantile q = q(1−q) / (n f(x_q)²) with the density f read off the
  reference quantile function. The p-value is the smallest of the three times three (Bonferroni); a level
  where the reference has an atom (a discrete feature: no density) is left out.
* ``window_rate`` — a rate's window share; sampling variance p̄(1−p̄)/n with p̄ over the reference (Laney's
  p′ chart). Effect: Cohen's h between the seasonal baseline and the current share.

Pure: no I/O, no clock.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import stats as _sp

from ragmon.drift import stats
from ragmon.drift.baseline import Baseline, compare
from ragmon.drift.comparison import Comparison, TestOutcome
from ragmon.drift.summary import LEVELS

#: the quantile levels ``window_quantiles`` tests, and the half-width of the span a density is read over
QUANTILE_LEVELS = (0.1, 0.5, 0.9)
_DENSITY_SPAN = 0.05


class NotTestable(ValueError):
    """The comparison holds too little to run this test (the reason is the message)."""


def _baseline(c: Comparison, values: np.ndarray, variances: np.ndarray) -> Baseline:
    counted = c.counted.copy()
    counted[c.current] = c.series.n[c.current] > 0
    values = np.where(counted, values, np.nan)
    result = compare(values, variances, current=c.current, reference=c.reference, period=c.period, guard=c.guard)
    if isinstance(result, str):
        raise NotTestable(result)
    return result


def _details(b: Baseline, **extra: object) -> dict[str, object]:
    return {"value": b.value, "expected": b.expected, "tau": b.tau, "sampling_sd": b.sampling_sd, "df": b.df,
            "reference_windows": b.windows, "same_slot_windows": b.same_slot, "rho": b.rho,
            "persistence": b.persistence, **extra}


def window_mean(c: Comparison) -> TestOutcome:
    s = c.series
    within = s.within_variance(c.reference_indices)
    n = np.maximum(s.n, 1)
    b = _baseline(c, s.mean, within / n)  # type: ignore[arg-type]
    effect = stats.normalised_effect(abs(b.value - b.expected), c.reference_std)
    return TestOutcome(b.z, b.p_value, effect, _details(b))


def window_quantiles(c: Comparison) -> TestOutcome:
    s = c.series
    q_ref = s.vincent(c.reference_indices)
    n = np.maximum(s.n, 1)
    results: list[tuple[float, Baseline]] = []
    skipped: list[float] = []
    for level in QUANTILE_LEVELS:
        lo, hi = _level_index(level - _DENSITY_SPAN), _level_index(level + _DENSITY_SPAN)
        width = float(q_ref[hi] - q_ref[lo])
        if not (math.isfinite(width) and width > 0):
            skipped.append(level)
            continue
        density = (LEVELS[hi] - LEVELS[lo]) / width
        variances = level * (1 - level) / (n * density * density)
        band = s.q[:, lo:hi + 1].mean(axis=1)  # type: ignore[index]
        results.append((level, _baseline(c, band, variances)))
    if not results:
        raise NotTestable("the reference has no density at the 10th, 50th or 90th percentile (a discrete feature)")
    level, best = min(results, key=lambda lb: lb[1].p_value)
    p = min(1.0, best.p_value * len(results))
    effect = max(stats.normalised_effect(abs(b.value - b.expected), c.reference_std) for _, b in results)
    return TestOutcome(best.z, p, effect, _details(best, quantile=level, levels_tested=[lv for lv, _ in results],
                                                  levels_skipped=skipped))


def window_rate(c: Comparison) -> TestOutcome:
    s = c.series
    ref = c.reference_indices
    ref = ref[c.counted[ref]]
    trials, hits = float(s.n[ref].sum()), float(s.k[ref].sum())  # type: ignore[index]
    if trials <= 0:
        raise NotTestable("no reference window has traffic")
    pbar = hits / trials
    if pbar <= 0 or pbar >= 1:  # a share never seen to vary: half an event of continuity
        pbar = (hits + 0.5) / (trials + 1)
    n = np.maximum(s.n, 1)
    b = _baseline(c, s.k / n, pbar * (1 - pbar) / n)  # type: ignore[operator]
    expected = min(max(b.expected, 0.0), 1.0)
    k, trials = int(s.k[c.current]), int(s.n[c.current])  # type: ignore[index]
    # a share never seen to move at this hour (all 0 or all 1) is taken as half an event off it
    floor = 0.5 / (float(s.n[c.same_slot_indices].sum()) + 1)  # type: ignore[index]
    z, p = _beta_binomial(k, trials, min(max(expected, floor), 1 - floor), b.tau ** 2 + b.expected_var)
    return TestOutcome(z, p, stats.cohens_h(expected, b.value), _details(b, z_normal=b.z))


def _beta_binomial(k: int, n: int, mean: float, between_var: float) -> tuple[float, float]:
    """Two-sided tail of ``k`` of ``n`` when the window's true share varies around ``mean`` with variance
    ``between_var`` (beta-binomial; binomial when it does not vary). Exact for the small counts of rare events,
    where a normal approximation would call three empty shortlists in 30 traces a one-in-a-million event.
    Returns (z, p): p = 2·min(P(K ≤ k), P(K ≥ k)); z = Φ⁻¹ of the mid-p P(K < k) + P(K = k)/2, which is centred
    on 0 for a discrete count, as the CUSUM needs (the p-value's own normal equivalent is not)."""
    mu = min(max(mean, 1e-12), 1 - 1e-12)
    if between_var > 0:
        size = max(mu * (1 - mu) / between_var - 1, 1e-3)  # α + β of the beta the share is drawn from
        dist = _sp.betabinom(n, mu * size, (1 - mu) * size)
    else:
        dist = _sp.binom(n, mu)
    below, at = float(dist.cdf(k - 1)) if k > 0 else 0.0, float(dist.pmf(k))
    p = float(min(1.0, 2 * min(below + at, 1 - below)))
    mid = min(max(below + at / 2, 1e-300), 1 - 1e-16)
    return float(_sp.norm.ppf(mid)), p


def _level_index(level: float) -> int:
    return int(round(min(max(level, 0.0), 1.0) * (len(LEVELS) - 1)))
