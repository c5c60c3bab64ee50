"""Distribution-shift statistics: two-sample KS, PSI, Wasserstein distance, proportion tests and Benjamini–Hochberg.

Pure functions of numbers: no I/O, no clock, no globals. Each statistic exists in two forms:

* from **samples** (numpy arrays of raw values) — the reference implementation, checked against SciPy;
* from **pre-aggregated** data — quantile sketches (``q`` = values at ``levels`` in [0, 1], as ClickHouse's
  ``quantilesTDigest`` returns them) or bin counts — so the heavy aggregation can run inside ClickHouse and
  only a few hundred numbers per group reach Python.

Conventions: ``ref`` is the reference window, ``cur`` the current one. PSI bins are the reference's
quantiles (equal reference mass per bin). Read PSI as < 0.1 "no material shift", 0.1–0.25 "moderate",
≥ 0.25 "major" — but only with a few hundred observations per window: with ≤ 100 traces PSI exceeds 0.1 in
nearly every window without any drift, which is why the check also requires significance and a minimum
sample size. Wasserstein distance is reported *normalised by the reference standard deviation*, i.e. in
reference-σ units, so one effect threshold works for scores, latencies and costs alike.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy import stats as _sp

#: proportions below this are clipped before PSI's log ratio (an empty bin would make PSI infinite)
PSI_EPSILON = 1e-4

ArrayLike = Sequence[float] | np.ndarray


def _finite(x: ArrayLike) -> np.ndarray:
    a = np.asarray(x, dtype=float).ravel()
    return a[np.isfinite(a)]


def _require(a: np.ndarray, what: str) -> None:
    if a.size == 0:
        raise ValueError(f"{what} needs at least one finite value, got none")


# -- Kolmogorov–Smirnov ------------------------------------------------------------------------------------


def ks_statistic(ref: ArrayLike, cur: ArrayLike) -> float:
    """Two-sample KS statistic D = sup |F_ref − F_cur| over the pooled sample (non-finite values dropped)."""
    a, b = np.sort(_finite(ref)), np.sort(_finite(cur))
    _require(a, "ks_statistic(ref)")
    _require(b, "ks_statistic(cur)")
    grid = np.concatenate([a, b])
    fa = np.searchsorted(a, grid, side="right") / a.size
    fb = np.searchsorted(b, grid, side="right") / b.size
    return float(np.max(np.abs(fa - fb)))


def ks_pvalue(d: float, n_ref: int, n_cur: int) -> float:
    """Two-sided asymptotic p-value of a KS statistic ``d`` (SciPy's ``ks_2samp(method='asymp')``)."""
    if n_ref <= 0 or n_cur <= 0:
        raise ValueError(f"ks_pvalue needs positive sample sizes, got n_ref={n_ref}, n_cur={n_cur}")
    if not 0.0 <= d <= 1.0:
        raise ValueError(f"a KS statistic lies in [0, 1], got {d!r}")
    en = round(n_ref * n_cur / (n_ref + n_cur))
    return float(np.clip(_sp.kstwo.sf(d, max(en, 1)), 0.0, 1.0))


def ks_2samp(ref: ArrayLike, cur: ArrayLike) -> tuple[float, float]:
    """(D, asymptotic two-sided p-value) from samples."""
    d = ks_statistic(ref, cur)
    return d, ks_pvalue(d, _finite(ref).size, _finite(cur).size)


def ks_statistic_batch(ref: np.ndarray, cur: np.ndarray) -> np.ndarray:
    """KS statistics of many pairs at once: ``ref`` is (B, n), ``cur`` (B, m); returns (B,). For simulations."""
    ref, cur = np.asarray(ref, dtype=float), np.asarray(cur, dtype=float)
    if ref.ndim != 2 or cur.ndim != 2 or ref.shape[0] != cur.shape[0]:
        raise ValueError(f"expected (B, n) and (B, m) arrays, got {ref.shape} and {cur.shape}")
    n, m = ref.shape[1], cur.shape[1]
    pooled = np.concatenate([ref, cur], axis=1)
    order = np.argsort(pooled, axis=1, kind="stable")
    step = np.where(order < n, 1.0 / n, -1.0 / m)
    return np.max(np.abs(np.cumsum(step, axis=1)), axis=1)


def cdf_from_quantiles(q: ArrayLike, levels: ArrayLike, x: ArrayLike, *, left: bool = False) -> np.ndarray:
    """The CDF implied by a quantile sketch, linear between sketch points; ``left`` gives F(x−).

    Ties in ``q`` (a discrete feature) become atoms: F jumps across them, as an empirical CDF does.
    """
    qa = np.maximum.accumulate(np.asarray(q, dtype=float))
    lv = np.asarray(levels, dtype=float)
    xs = np.atleast_1d(np.asarray(x, dtype=float))
    if qa.size != lv.size or qa.size < 2:
        raise ValueError(f"need matching quantiles and levels (≥ 2), got {qa.size} and {lv.size}")
    i = np.searchsorted(qa, xs, side="left" if left else "right") - 1
    inside = (i >= 0) & (i < qa.size - 1)
    j = np.clip(i, 0, qa.size - 2)
    width = qa[j + 1] - qa[j]
    frac = np.divide(xs - qa[j], width, out=np.ones_like(xs), where=width > 0)
    f = lv[j] + (lv[j + 1] - lv[j]) * np.clip(frac, 0.0, 1.0)
    return np.where(inside, f, np.where(i < 0, 0.0, 1.0))


def ks_from_quantiles(q_ref: ArrayLike, q_cur: ArrayLike, levels: ArrayLike) -> float:
    """KS statistic between two quantile sketches taken at the same ``levels``."""
    grid = np.union1d(np.asarray(q_ref, dtype=float), np.asarray(q_cur, dtype=float))
    d_right = np.abs(cdf_from_quantiles(q_ref, levels, grid) - cdf_from_quantiles(q_cur, levels, grid))
    d_left = np.abs(cdf_from_quantiles(q_ref, levels, grid, left=True)
                    - cdf_from_quantiles(q_cur, levels, grid, left=True))
    return float(min(1.0, max(d_right.max(), d_left.max())))


# -- PSI ---------------------------------------------------------------------------------------------------


def psi_bin_levels(bins: int) -> np.ndarray:
    """Interior reference-quantile levels that cut ``bins`` equal-mass bins (10 → 0.1 … 0.9)."""
    if bins < 2:
        raise ValueError(f"PSI needs at least 2 bins, got {bins}")
    return np.arange(1, bins) / bins


def quantile_bin_edges(ref: ArrayLike, bins: int = 10) -> np.ndarray:
    """Bin edges at the reference's quantiles (duplicates, from ties, merged)."""
    a = _finite(ref)
    _require(a, "quantile_bin_edges(ref)")
    return np.unique(np.quantile(a, psi_bin_levels(bins)))


def bin_counts(x: ArrayLike, edges: ArrayLike) -> np.ndarray:
    """Counts per bin (−∞, e1], (e1, e2], …, (e_last, ∞)."""
    idx = np.searchsorted(np.asarray(edges, dtype=float), _finite(x), side="left")
    return np.bincount(idx, minlength=len(edges) + 1).astype(float)


def psi_from_counts(ref_counts: ArrayLike, cur_counts: ArrayLike, epsilon: float = PSI_EPSILON) -> float:
    """PSI = Σ (c − r) · ln(c / r) over bins, with proportions clipped at ``epsilon``."""
    r, c = np.asarray(ref_counts, dtype=float), np.asarray(cur_counts, dtype=float)
    if r.shape != c.shape or r.ndim != 1:
        raise ValueError(f"bin counts must be two 1-d arrays of one length, got {r.shape} and {c.shape}")
    if r.sum() <= 0 or c.sum() <= 0:
        raise ValueError("PSI needs at least one observation in each window")
    rp = np.clip(r / r.sum(), epsilon, None)
    cp = np.clip(c / c.sum(), epsilon, None)
    return float(np.sum((cp - rp) * np.log(cp / rp)))


def psi(ref: ArrayLike, cur: ArrayLike, bins: int = 10) -> float:
    """PSI from samples, bins at the reference's quantiles."""
    edges = quantile_bin_edges(ref, bins)
    return psi_from_counts(bin_counts(ref, edges), bin_counts(cur, edges))


def psi_counts_from_quantiles(q_ref: ArrayLike, q_cur: ArrayLike, levels: ArrayLike, n_ref: int, n_cur: int,
                              bins: int = 10) -> tuple[np.ndarray, np.ndarray]:
    """(reference, current) counts in reference-quantile bins, derived from two quantile sketches."""
    edges = np.unique(np.interp(psi_bin_levels(bins), levels, np.maximum.accumulate(np.asarray(q_ref, float))))
    def counts(q: ArrayLike, n: int) -> np.ndarray:
        cdf = np.concatenate([[0.0], cdf_from_quantiles(q, levels, edges), [1.0]])
        return np.clip(np.diff(cdf), 0.0, None) * n
    return counts(q_ref, n_ref), counts(q_cur, n_cur)


# -- Wasserstein -------------------------------------------------------------------------------------------


def wasserstein(ref: ArrayLike, cur: ArrayLike) -> float:
    """First Wasserstein distance ∫ |F_ref − F_cur| dx between two samples."""
    a, b = np.sort(_finite(ref)), np.sort(_finite(cur))
    _require(a, "wasserstein(ref)")
    _require(b, "wasserstein(cur)")
    pooled = np.sort(np.concatenate([a, b]))
    deltas = np.diff(pooled)
    fa = np.searchsorted(a, pooled[:-1], side="right") / a.size
    fb = np.searchsorted(b, pooled[:-1], side="right") / b.size
    return float(np.sum(np.abs(fa - fb) * deltas))


def wasserstein_from_quantiles(q_ref: ArrayLike, q_cur: ArrayLike, levels: ArrayLike) -> float:
    """W1 = ∫₀¹ |Q_ref(p) − Q_cur(p)| dp from two quantile sketches (trapezoid rule over ``levels``)."""
    diff = np.abs(np.asarray(q_ref, dtype=float) - np.asarray(q_cur, dtype=float))
    lv = np.asarray(levels, dtype=float)
    return float(np.sum((diff[1:] + diff[:-1]) / 2 * np.diff(lv)))


def normalised_effect(distance: float, ref_std: float) -> float:
    """A distance in reference-σ units; a constant reference makes any change infinite and no change 0."""
    if ref_std > 0 and np.isfinite(ref_std):
        return float(distance / ref_std)
    return 0.0 if distance == 0 else float("inf")


# -- rates -------------------------------------------------------------------------------------------------


def two_proportion_z(k_ref: int, n_ref: int, k_cur: int, n_cur: int) -> tuple[float, float]:
    """Pooled two-proportion z test: (z, two-sided p). Equals a 2×2 chi-square without continuity correction."""
    for k, n, name in ((k_ref, n_ref, "reference"), (k_cur, n_cur, "current")):
        if n <= 0 or not 0 <= k <= n:
            raise ValueError(f"{name} window: need 0 ≤ successes ≤ n and n > 0, got {k} of {n}")
    pooled = (k_ref + k_cur) / (n_ref + n_cur)
    se = np.sqrt(pooled * (1 - pooled) * (1 / n_ref + 1 / n_cur))
    diff = k_cur / n_cur - k_ref / n_ref
    if se == 0:
        return 0.0, 1.0
    z = float(diff / se)
    return z, float(2 * _sp.norm.sf(abs(z)))


def chi_square(table: ArrayLike) -> tuple[float, float, int]:
    """Pearson chi-square test of independence on an r×c count table (no continuity correction).

    Columns that are zero in every row are dropped (they carry no information). Returns (chi2, p, dof).
    """
    t = np.asarray(table, dtype=float)
    if t.ndim != 2 or t.shape[0] < 2:
        raise ValueError(f"chi_square needs a table with ≥ 2 rows, got shape {t.shape}")
    if (t < 0).any() or not np.isfinite(t).all():
        raise ValueError("chi_square needs finite, non-negative counts")
    t = t[:, t.sum(axis=0) > 0]
    if t.shape[1] < 2 or (t.sum(axis=1) == 0).any():
        return 0.0, 1.0, 0
    expected = np.outer(t.sum(axis=1), t.sum(axis=0)) / t.sum()
    chi2 = float(np.sum((t - expected) ** 2 / expected))
    dof = (t.shape[0] - 1) * (t.shape[1] - 1)
    return chi2, float(_sp.chi2.sf(chi2, dof)), dof


def cohens_h(p_ref: float, p_cur: float) -> float:
    """Effect size for two proportions: |2·asin√p_cur − 2·asin√p_ref| (0.2 small, 0.5 medium, 0.8 large)."""
    return float(abs(2 * np.arcsin(np.sqrt(p_cur)) - 2 * np.arcsin(np.sqrt(p_ref))))


# -- multiple testing --------------------------------------------------------------------------------------


def benjamini_hochberg(p_values: ArrayLike) -> np.ndarray:
    """BH-adjusted p-values (q-values); NaN entries (tests not run) stay NaN and do not count in m."""
    p = np.asarray(p_values, dtype=float)
    out = np.full(p.shape, np.nan)
    ok = np.isfinite(p)
    m = int(ok.sum())
    if m == 0:
        return out
    if ((p[ok] < 0) | (p[ok] > 1)).any():
        raise ValueError("p-values must lie in [0, 1]")
    values = p[ok]
    order = np.argsort(values)
    ranked = values[order] * m / np.arange(1, m + 1)
    adjusted = np.minimum(1.0, np.minimum.accumulate(ranked[::-1])[::-1])
    result = np.empty(m)
    result[order] = adjusted
    out[ok] = result
    return out
