"""Is the current window unusual for this hour, given how much windows naturally differ? (the window tests)

Traffic is not a stream of independent draws: each hour has its own mix of query types and its own popular
queries, so a statistic of a window — its mean score, its 10th percentile, its empty-shortlist rate — varies
from window to window by more than sampling noise, and that extra spread does not shrink with volume. A test
that counts traces as independent therefore alarms more often the more traffic there is. Here the window is
the unit of replication (a random-effects model, as in meta-analysis or Laney's p′ control chart):

    s_w = μ_slot(w) + u_w + e_w,    u_w ~ (0, τ²) between windows,    e_w ~ (0, v_w) sampling, v_w = c / n_w

* ``μ_slot`` — the seasonal baseline: the mean of the reference windows at the same slot (hour of day) as
  the window, so daily seasonality is not drift;
* ``τ²`` — the between-window variance, estimated by the method of moments from every reference window's
  leave-one-out residual against the other windows of its slot:
  ``r_w = s_w − mean(others)``, ``E[r_w²] = τ²(1 + 1/m) + v_w + v̄_others/m``  ⇒
  ``τ̂² = max(0, Σ(r_w² − v_w − v̄_others/m) / Σ(1 + 1/m))``;
* the current window is one more draw: ``t = (s_0 − μ̂) / √(τ̂²(1 + 1/D) + v_0 + v̄_slot/D)`` with D
  reference windows at its slot. Its p-value is two-sided Student t with the degrees of freedom the spread
  estimate is worth: the residuals' (reference windows minus slots), fewer when consecutive windows move
  together or their residuals have heavy tails (``_effective_df``) — popular queries that trend for hours make
  the estimate of the spread far noisier than its window count suggests. When the residuals' tails are heavy,
  the t distribution is also the one whose kurtosis matches theirs (excess kurtosis 6/(ν − 4)), scaled to unit
  variance. ``z`` is the normal-equivalent of the p-value, signed by the tested statistic (the innovation's
  sign when whitened, below): what the sequential rule accumulates.

With ``τ² = 0`` (independent draws) this is a z test with the sampling variance alone; with ``τ² > 0`` the
current window has to stand out from the natural spread. When consecutive windows move together (``rho``, the
lag-one correlation of consecutive standardised residuals, is positive — popular queries that trend for hours),
the test is on the innovation ``(t₀ − ρ·t₁) / √(1 − ρ²)``: how far the current window is from what the previous
window's deviation predicts. A sudden shift stands out more that way; a slow excursion of the traffic mix, which
builds up window by window, does not page; a persistent shift is the sequential rule's to accumulate.

Pure: numpy and scipy on arrays; no I/O, no clock.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import special as _special


@dataclass(frozen=True, slots=True)
class Baseline:
    """The current window against its seasonal baseline and the natural between-window spread."""

    value: float        # the statistic in the current window
    expected: float     # its seasonal baseline (mean of the same-slot reference windows)
    expected_var: float  # the baseline's own uncertainty (variance of that mean)
    z: float
    p_value: float
    tau: float          # between-window standard deviation beyond sampling noise
    sampling_sd: float  # the current window's sampling standard deviation
    df: float           # degrees of freedom of the t distribution the p-value is read from
    windows: int        # reference windows that entered
    same_slot: int      # of which at the current window's slot
    rho: float          # lag-one correlation of consecutive standardised residuals (0 when unknown)
    persistence: float = 1.0  # long-run variance of the innovations over their variance (≥ 1; see _persistence)


def compare(values: np.ndarray, variances: np.ndarray, *, current: int, reference: int,
            period: int, guard: int = 0) -> Baseline | str:
    """Test ``values[current]`` against the ``reference`` windows after it (``current + 1`` … ``current +
    reference``, older), with seasonal slots of ``period`` windows (1 = no seasonality), leaving out the
    ``guard`` windows right after the current one: a drift that began a few windows ago must not widen the
    spread (or move the baseline) the current window is judged against.

    ``values`` and ``variances`` (the sampling variance of each window's statistic) are NaN for windows that do
    not count. Returns the reason as a string when there is not enough to test.
    """
    if period < 1 or reference < 1 or guard < 0:
        raise ValueError(f"need period ≥ 1, reference ≥ 1 and guard ≥ 0, got {period}, {reference}, {guard}")
    s0, v0 = float(values[current]), float(variances[current])
    if not (math.isfinite(s0) and math.isfinite(v0)):
        return "the current window has too few traces"
    idx = np.arange(current + 1 + min(guard, reference - 1), min(current + reference + 1, values.size))
    s, v = values[idx], variances[idx]
    ok = np.isfinite(s) & np.isfinite(v)
    idx, s, v = idx[ok], s[ok], v[ok]
    slot = (idx - current) % period
    m = np.bincount(slot, minlength=period).astype(float)
    same = slot == 0
    if not same.any():
        return "no reference window at the current window's time of day"
    sum_s = np.bincount(slot, weights=s, minlength=period)
    sum_v = np.bincount(slot, weights=v, minlength=period)
    others = m[slot] - 1
    loo = others >= 1
    if not loo.any():
        return "too few reference windows to measure their natural spread"
    mean_others = (sum_s[slot][loo] - s[loo]) / others[loo]
    vbar_others = (sum_v[slot][loo] - v[loo]) / others[loo]
    r = s[loo] - mean_others
    a = 1 + 1 / others[loo]
    b = v[loo] + vbar_others / others[loo]
    tau2 = max(0.0, float(np.sum(r * r - b) / np.sum(a)))
    df = int(np.sum(np.maximum(m - 1, 0)))
    d = float(m[0])
    expected = float(sum_s[0] / d)
    expected_var = (tau2 + float(sum_v[0] / d)) / d
    var = tau2 + v0 + expected_var
    deviation = s0 - expected
    scale = np.sqrt(a * tau2 + b)
    # a window whose value and variance equal the others' exactly (a constant feature) deviates by nothing
    standardised = np.divide(r, scale, out=np.zeros_like(r), where=scale > 0)
    rho = _lag_one(idx[loo], standardised)
    residuals = _in_window_order(idx[loo], standardised)
    innovations = _whiten(residuals, max(rho, 0.0))
    # the tested statistic is the innovation when whitened: its tails, not the residuals', set the reference
    nu, df_eff = _tail_df(innovations, df), _effective_df(residuals, df)
    previous = _deviation(values, variances, current + 1, current, idx, s, v, slot, tau2, period) if rho > 0 else None
    if var > 0:
        t = deviation / math.sqrt(var)
        if previous is not None:  # the innovation: what the previous window's deviation does not predict
            t = (t - rho * previous) / math.sqrt(1 - rho * rho)
        # the sign is the tested statistic's (the innovation's when whitened), not the raw deviation's: the raw
        # deviation of trending traffic keeps its sign for hours, and the CUSUM would add that up as drift
        sign = t if t != 0 else deviation
        t = abs(t)
        # scipy.special's Student t and normal quantile: scipy.stats' distribution objects cost ~0.1 ms a call
        p = float(2 * (_special.stdtr(min(nu, df_eff), -t * math.sqrt(nu / (nu - 2))) if nu < df_eff
                       else _special.stdtr(max(df_eff, 1.0), -t)))
        z = math.copysign(float(-_special.ndtri(p / 2)), sign) if p > 0 else math.copysign(math.inf, sign)
    else:
        p, z = (1.0, 0.0) if deviation == 0 else (0.0, math.copysign(math.inf, deviation))
    return Baseline(s0, expected, expected_var, z, p, math.sqrt(tau2), math.sqrt(v0), min(nu, df_eff),
                    int(idx.size), int(d), rho, _persistence(innovations))


#: lags over which ``_persistence`` sums the innovations' autocorrelation
PERSISTENCE_LAGS = 24


def _in_window_order(idx: np.ndarray, z: np.ndarray) -> np.ndarray:
    """The standardised residuals as a gap-filled series in window order (NaN where a window is missing)."""
    ok = np.isfinite(z)
    idx, z = idx[ok], z[ok]
    if idx.size == 0:
        return np.empty(0)
    full = np.full(int(idx.max() - idx.min()) + 1, np.nan)
    full[idx - idx.min()] = z
    return full


def _whiten(series: np.ndarray, rho: float) -> np.ndarray:
    """The innovations of a series in window order when ``rho`` > 0: ``(z_w − ρ z_{w+1}) / √(1 − ρ²)`` over pairs
    of consecutive windows (NaN where either is missing); the series itself otherwise."""
    return (series[:-1] - rho * series[1:]) / math.sqrt(1 - rho * rho) if rho > 0 else series


def _persistence(innov: np.ndarray) -> float:
    """How much sums of L consecutive innovations vary beyond L independent ones: the variance ratio
    ``1 + 2 Σ_{j<L} (1 − j/L) ρ_j`` (Bartlett weights), L = ``PERSISTENCE_LAGS`` (a day of hourly windows, the
    CUSUM's lookback; a sixth of the windows when there are fewer). Trending traffic whose excursions last longer
    than one lag-one correlation describes leaves innovations that still lean the same way for hours; the
    sequential rule divides its increments by the square root of this so it does not add that up as drift.

    Taken at the upper end of what the sample allows — one standard error of the Bartlett estimate above it,
    a relative ``√(4L / 3n)`` for n innovations — and between 1 and 10: a week of windows holds few of the
    excursions that make a CUSUM false alarm, so the estimate is low more often than the budget can afford.
    ``innov`` is ``_whiten``'s series."""
    lag, acf, _, lags = _acf(innov, PERSISTENCE_LAGS)
    if lags < 2:
        return 1.0
    lrv = 1.0 + float(np.sum(2 * (1 - lag / lags) * acf))
    n = int(np.isfinite(innov).sum())
    return float(min(max(lrv, 1.0) * (1 + math.sqrt(4 * lags / (3 * n))), 10.0))


def _deviation(values: np.ndarray, variances: np.ndarray, w: int, current: int, idx: np.ndarray, s: np.ndarray,
               v: np.ndarray, slot: np.ndarray, tau2: float, period: int) -> float | None:
    """The standardised deviation of window ``w`` (older than the current one) from its own seasonal baseline:
    the mean of the other reference windows at its slot."""
    if w >= values.size or not (math.isfinite(values[w]) and math.isfinite(variances[w])):
        return None
    mine = (slot == (w - current) % period) & (idx != w)
    count = int(mine.sum())
    if count == 0:
        return None
    var = tau2 + float(variances[w]) + (tau2 + float(v[mine].mean())) / count
    return (float(values[w]) - float(s[mine].mean())) / math.sqrt(var) if var > 0 else None


def _effective_df(residuals: np.ndarray, df: int) -> float:
    """Degrees of freedom the spread estimate is worth. A sample variance of n independent normal residuals has
    ``Var(s²) = 2σ⁴/n``; of an autocorrelated series with excess kurtosis κ, about ``σ⁴ (2 Σ_j ρ_j² + κ) / n``
    (the sum over every lag, both signs, ρ₀ = 1). So the windows are worth ``df · 2 / (2 Σ_j ρ_j² + κ)``: fewer
    when neighbouring windows move together — over hours, not only one (popular queries whose popularity walks
    for half a day) — or their residuals have heavy tails. ``residuals`` are in window order (NaN: missing); the
    autocorrelations are summed over ``PERSISTENCE_LAGS`` lags, each less the 1/pairs its square has by chance."""
    excess = _excess_kurtosis(residuals)
    kurtosis = max(0.0, excess) if excess is not None else 0.0
    _, acf, pairs, _ = _acf(residuals, PERSISTENCE_LAGS)
    squares = float(np.sum(np.maximum(acf * acf - 1 / pairs, 0.0)))
    return max(1.0, df * 2 / (2 * (1 + 2 * squares) + kurtosis))


def _acf(series: np.ndarray, lags: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """Autocorrelations of a zero-mean series at lags 1 … L (L = ``lags``, at most a sixth of the values present),
    over the pairs of windows both present: (lags, autocorrelations, pairs, L); lags with fewer than 2L pairs are
    left out. NaN marks a missing window."""
    present = np.isfinite(series)
    lags = min(lags, int(present.sum()) // 6)
    var = float(np.mean(series[present] ** 2)) if present.any() else 0.0
    if lags < 2 or var <= 0:
        return np.empty(0), np.empty(0), np.empty(0), 0
    x = np.where(present, series, 0.0)
    m = present.astype(float)
    # every lag at once: sums of products over pairs of windows both present, and how many such pairs
    products = np.correlate(x, x, "full")[x.size:x.size + lags]
    pairs = np.rint(np.correlate(m, m, "full")[x.size:x.size + lags])
    use = pairs >= 2 * lags
    return np.arange(1, lags + 1)[use], products[use] / pairs[use] / var, pairs[use], lags


def _excess_kurtosis(z: np.ndarray) -> float | None:
    """Sample excess kurtosis of the finite values of a zero-mean series (moments about 0); None with fewer than 20
    or no spread."""
    z = z[np.isfinite(z)]
    second = float(np.mean(z * z)) if z.size else 0.0
    if z.size < 20 or second <= 0:
        return None
    return float(np.mean(z ** 4)) / second ** 2 - 3


def _tail_df(z: np.ndarray, df: int) -> float:
    """Degrees of freedom of a unit-variance Student t with the excess kurtosis of ``z`` — taken half a standard
    error (``√(24/n)``) above the sample's, because a sample kurtosis under-reads heavy tails: the surges of popular
    queries that make them are in few reference weeks. ``df`` when the tails are not heavier than that (or there
    are too few residuals to tell), else between 4.5 (below which the fourth moment does not exist) and ``df``."""
    sample = _excess_kurtosis(z)
    if sample is None or df <= 5:
        return float(df)
    excess = sample + 0.5 * math.sqrt(24 / int(np.isfinite(z).sum()))
    if excess <= 6 / (df - 4):
        return float(df)
    return float(max(4 + 6 / excess, 4.5))


#: the largest lag-one correlation the whitening uses
MAX_RHO = 0.99


def _lag_one(idx: np.ndarray, z: np.ndarray) -> float:
    """Lag-one correlation of standardised residuals over pairs of consecutive windows."""
    ok = np.isfinite(z)
    idx, z = idx[ok], z[ok]
    if idx.size < 3:
        return 0.0
    pairs = np.flatnonzero(np.diff(idx) == 1)
    if pairs.size < 2:
        return 0.0
    denom = float(np.sum(z * z)) / idx.size
    if denom <= 0:
        return 0.0
    # at most MAX_RHO: the whitening divides by √(1 − ρ²), and two windows that move exactly together (ρ = 1,
    # e.g. a reference of few windows that all rise) would divide by zero
    return float(np.clip(np.mean(z[pairs] * z[pairs + 1]) / denom, -MAX_RHO, MAX_RHO))
