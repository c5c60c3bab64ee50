"""The window tests: the current window against the natural spread of its reference windows.

Each function takes a ``Comparison`` and returns a ``TestOutcome`` (statistic = the z-score, p-value from the
random-effects model of ``ragmon.drift.method.baseline``, effect size); the registry (``ragmon.drift.method.registry``)
holds them with their default thresholds.

* ``window_mean`` — a continuous feature's window mean; sampling variance = the traces' within-window
  variance (pooled over the reference) / n, times the current window's design effect with its questions as
  clusters (``Series.design_effect``: a burst of new questions, each asked many times with its own level, holds
  less information than its count says). Effect: |shift| in reference standard deviations.
* ``window_quantiles`` — its 10th, 50th and 90th percentiles (a heavier tail or a new mode that barely moves the
  mean); sampling variance of a quantile q = q(1−q) / (n f(x_q)²) with the density f read off the reference quantile
  function, times the same design effect. The p-value is the smallest of the three times three (Bonferroni); a level
  where the reference has an atom (a discrete feature: no density) is left out.
* ``window_median`` — its median alone, as one quantile of ``window_quantiles`` (no Bonferroni): what the CUSUM
  accumulates for a continuous feature with a density at its median (``ragmon.drift.method.assess``).
* ``window_rate`` — a rate's window share; sampling variance p̄(1−p̄)/n with p̄ over the reference (Laney's
  p′ chart), or, adjusted for the question, ``Σ p_q(1 − p_q) / n²`` over the window's traces (``RateSummary.var``);
  the p-value is the beta-binomial tail of a count with that much sampling variance. Effect: Cohen's h between the
  seasonal baseline and the current share.

Pure: no I/O, no clock.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
from scipy import special as _special

from ragmon.drift.method.baseline import Baseline, compare_rows
from ragmon.drift.method.comparison import Comparison, TestOutcome
from ragmon.drift.method.summary import LEVELS
from ragmon.stats import shift as stats

#: the quantile levels ``window_quantiles`` tests, and the half-width of the span a density is read over
QUANTILE_LEVELS = (0.1, 0.5, 0.9)
_DENSITY_SPAN = 0.05


class NotTestable(ValueError):
    """The comparison holds too little to run this test (the reason is the message)."""


def _deff(c: Comparison) -> np.ndarray:
    """Per window, the factor its sampling variance is widened by: the current window's design effect
    (``Series.design_effect``, its questions as clusters), 1 for the reference windows, whose clustering the spread
    between them (τ²) already holds."""
    d = c.series.design_effect()
    return np.where(np.arange(len(d)) == c.current, d, 1.0)


#: what a window test reads off a comparison: each window's statistic and its sampling variance, and anything its
#: outcome needs besides the baseline (``_baselines``); raises ``NotTestable``
Inputs = Callable[[Comparison], tuple[np.ndarray, np.ndarray, object]]
#: a window test's outcome from its comparison, baseline and the inputs' third part
Outcome = Callable[[Comparison, Baseline, object], TestOutcome]


def _baselines(cs: Sequence[Comparison], inputs: Inputs) -> list[tuple[Baseline, object] | NotTestable]:
    """Each comparison's baseline test of the statistic ``inputs`` reads off it, all in one ``compare_rows``: the
    comparisons share their series' length, reference, period and guard (one series at several current windows,
    the CUSUM's look-back: ``assess``)."""
    out: list[tuple[Baseline, object] | NotTestable] = []
    rows: list[tuple[int, Comparison, np.ndarray, np.ndarray, object]] = []
    for c in cs:
        try:
            values, variances, extra = inputs(c)
        except NotTestable as e:
            out.append(e)
            continue
        counted = c.counted.copy()
        counted[c.current] = c.series.n[c.current] > 0
        rows.append((len(out), c, np.where(counted, values, np.nan), variances, extra))
        out.append(NotTestable("not compared"))
    if rows:
        first = rows[0][1]
        shape = (len(first.series), first.reference, first.period, first.guard)
        if any((len(c.series), c.reference, c.period, c.guard) != shape for _, c, *_ in rows):
            raise ValueError("comparisons tested together must share their series' length, reference, period and guard")
        results = compare_rows(np.stack([r[2] for r in rows]), np.stack([r[3] for r in rows]),
                               [r[1].current for r in rows], reference=first.reference, period=first.period,
                               guard=first.guard)
        for (i, *_, extra), result in zip(rows, results, strict=True):
            out[i] = NotTestable(result) if isinstance(result, str) else (result, extra)
    return out


def _outcomes(cs: Sequence[Comparison], inputs: Inputs, outcome: Outcome) -> list[TestOutcome | NotTestable]:
    return [b if isinstance(b, NotTestable) else outcome(c, *b) for c, b in zip(cs, _baselines(cs, inputs),
                                                                               strict=True)]


def _one(c: Comparison, inputs: Inputs) -> Baseline:
    result = _baselines([c], inputs)[0]
    if isinstance(result, NotTestable):
        raise result
    return result[0]


def _single(rows: Callable[[Sequence[Comparison]], list[TestOutcome | NotTestable]]) -> Callable[[Comparison],
                                                                                                  TestOutcome]:
    """The test of one comparison, from the test of many."""
    def run(c: Comparison) -> TestOutcome:
        result = rows([c])[0]
        if isinstance(result, NotTestable):
            raise result
        return result
    run.__name__, run.__doc__ = rows.__name__.removesuffix("_rows"), rows.__doc__
    return run


def _details(b: Baseline, **extra: object) -> dict[str, object]:
    return {"value": b.value, "expected": b.expected, "tau": b.tau, "sampling_sd": b.sampling_sd, "df": b.df,
            "reference_windows": b.windows, "same_slot_windows": b.same_slot, "rho": b.rho,
            "persistence": b.persistence, **extra}


def _mean_inputs(c: Comparison) -> tuple[np.ndarray, np.ndarray, object]:
    s = c.series
    within = s.within_variance(c.reference_indices)
    n = np.maximum(s.n, 1)
    return s.mean, within / n * _deff(c), None  # type: ignore[return-value]


def _mean_outcome(c: Comparison, b: Baseline, _: object) -> TestOutcome:
    effect = stats.normalised_effect(abs(b.value - b.expected), c.reference_std)
    return TestOutcome(b.z, b.p_value, effect, _details(b))


def window_mean_rows(cs: Sequence[Comparison]) -> list[TestOutcome | NotTestable]:
    return _outcomes(cs, _mean_inputs, _mean_outcome)


class _NoDensity(NotTestable):
    """The reference has an atom at the quantile tested (a discrete feature): no density to scale its variance."""


def _quantile_inputs(level: float) -> Inputs:
    """The window test of one quantile (its band ±``_DENSITY_SPAN``, variance q(1 − q) / (n f²) with the density
    read off the reference quantile function); ``_NoDensity`` where the reference has an atom there."""
    def inputs(c: Comparison) -> tuple[np.ndarray, np.ndarray, object]:
        s = c.series
        q_ref = s.vincent(c.reference_indices)
        n = np.maximum(s.n, 1)
        lo, hi = _level_index(level - _DENSITY_SPAN), _level_index(level + _DENSITY_SPAN)
        width = float(q_ref[hi] - q_ref[lo])
        if not (math.isfinite(width) and width > 0):
            at = "median" if level == 0.5 else f"{level:.0%} quantile"
            raise _NoDensity(f"the reference has no density at its {at} (a discrete feature)")
        density = (LEVELS[hi] - LEVELS[lo]) / width
        variances = level * (1 - level) / (n * density * density) * _deff(c)
        return s.q[:, lo:hi + 1].mean(axis=1), variances, None  # type: ignore[index]
    return inputs


def window_quantiles(c: Comparison) -> TestOutcome:
    results: list[tuple[float, Baseline]] = []
    skipped: list[float] = []
    for level in QUANTILE_LEVELS:
        try:
            results.append((level, _one(c, _quantile_inputs(level))))
        except _NoDensity:
            skipped.append(level)
    if not results:
        raise NotTestable("the reference has no density at the 10th, 50th or 90th percentile (a discrete feature)")
    level, best = min(results, key=lambda lb: lb[1].p_value)
    p = min(1.0, best.p_value * len(results))
    effect = max(stats.normalised_effect(abs(b.value - b.expected), c.reference_std) for _, b in results)
    return TestOutcome(best.z, p, effect, _details(best, quantile=level, levels_tested=[lv for lv, _ in results],
                                                  levels_skipped=skipped))


def has_median_density(c: Comparison) -> bool:
    """Whether the reference windows have a density at their median (not an atom: a count, a judge score)."""
    q_ref = c.series.vincent(c.reference_indices)
    width = float(q_ref[_level_index(0.5 + _DENSITY_SPAN)] - q_ref[_level_index(0.5 - _DENSITY_SPAN)])
    return math.isfinite(width) and width > 0


def _median_outcome(c: Comparison, b: Baseline, _: object) -> TestOutcome:
    return TestOutcome(b.z, b.p_value, stats.normalised_effect(abs(b.value - b.expected), c.reference_std),
                       _details(b, quantile=0.5))


def window_median_rows(cs: Sequence[Comparison]) -> list[TestOutcome | NotTestable]:
    """The window's median against its seasonal baseline and the natural spread between windows: the location
    statistic the CUSUM accumulates for a continuous feature with a density at its median (``assess``). On traffic
    that mixes recurring questions (adjusted tightly, ``drift.by_query``) with new ones and bursts (not adjustable,
    far from the bulk), the mean is carried by the tail and the median by the bulk: on composite traffic at 200 traces
    an hour the median's between-window spread was half the mean's and its z-scores for the same drop 1.5–2.5 times
    as large."""
    return _outcomes(cs, _quantile_inputs(0.5), _median_outcome)


def _rate_inputs(c: Comparison) -> tuple[np.ndarray, np.ndarray, object]:
    s = c.series
    ref = c.reference_indices
    ref = ref[c.counted[ref]]
    trials, hits = float(s.n[ref].sum()), float(s.k[ref].sum())  # type: ignore[index]
    if trials <= 0:
        raise NotTestable("no reference window has traffic")
    pbar = hits / trials
    never = pbar <= 0 or pbar >= 1
    if never:  # a share never seen to vary: half an event of continuity
        pbar = (hits + 0.5) / (trials + 1)
    n = np.maximum(s.n, 1)
    # each window's sampling variance: Σ p_q(1 − p_q) over its traces when adjusted for the question, else p̄(1 − p̄)
    # a trace; a question that always returns nothing varies by nothing. A share the reference never saw move has
    # no question level to learn from (every level is 0 or 1): the continuity share's variance applies, as unadjusted
    var = s.var if s.var is not None and not never else np.full(len(s), np.nan)
    total = np.where(np.isfinite(var), var, pbar * (1 - pbar) * n)
    return s.k / n, total / (n * n), (pbar, float(total[c.current]))  # type: ignore[operator]


def _rate_outcome(c: Comparison, b: Baseline, extra: object) -> TestOutcome:
    s = c.series
    pbar, total = extra  # type: ignore[misc]
    expected = min(max(b.expected, 0.0), 1.0)
    k, trials = float(s.k[c.current]), int(s.n[c.current])  # type: ignore[index]
    # a share never seen to move at this hour (all 0 or all 1) is taken as half an event off it
    floor = 0.5 / (float(s.n[c.same_slot_indices].sum()) + 1)  # type: ignore[index]
    # the count as a binomial whose share varies as the window's does: as many trials as that takes (the count
    # itself when not adjusted); a window of questions that always do the same is worth many trials
    ratio = min(max(pbar * (1 - pbar) * trials / max(total, 1e-12), 1e-3), 100.0)
    n_eff = max(1, int(round(trials * ratio)))
    share = min(max(k / trials, 0.0), 1.0) if trials else 0.0
    z, p = _beta_binomial(share * n_eff, n_eff, min(max(expected, floor), 1 - floor), b.tau ** 2 + b.expected_var)
    # an adjusted share can fall a little outside [0, 1]
    effect = stats.cohens_h(expected, min(max(b.value, 0.0), 1.0))
    return TestOutcome(z, p, effect, _details(b, z_normal=b.z, effective_trials=n_eff))


def window_rate_rows(cs: Sequence[Comparison]) -> list[TestOutcome | NotTestable]:
    return _outcomes(cs, _rate_inputs, _rate_outcome)


window_mean = _single(window_mean_rows)
window_median = _single(window_median_rows)
window_rate = _single(window_rate_rows)


def _beta_binomial(k: float, n: int, mean: float, between_var: float) -> tuple[float, float]:
    """Two-sided tail of ``k`` of ``n`` when the window's true share varies around ``mean`` with variance
    ``between_var`` (beta-binomial; binomial when it does not vary). Exact for the small counts of rare events,
    where a normal approximation would call three empty shortlists in 30 traces a one-in-a-million event.
    Returns (z, p): p = 2·min(P(K ≤ k), P(K ≥ k)); z = Φ⁻¹ of the mid-p P(K < k) + P(K = k)/2, which is centred
    on 0 for a discrete count, as the CUSUM needs (the p-value's own normal equivalent is not). A count that is not
    a whole number (adjusted for the question) is interpolated between the whole numbers on either side of it."""
    mu = min(max(mean, 1e-12), 1 - 1e-12)
    size = max(mu * (1 - mu) / between_var - 1, 1e-3) if between_var > 0 else math.inf  # α + β of the beta
    k = min(max(k, 0.0), float(n))
    low = math.floor(k)
    # P(K < k), P(K = k), P(K > k) at the whole numbers on either side of k (one pmf for both)
    wholes = (low, low + 1) if k > low else (low,)
    counted = dict(zip(wholes, _count_tails(wholes, n, mu, size), strict=True))

    def tails(whole: int) -> tuple[float, float]:
        below, at, above = counted[whole]
        p = min(1.0, 2 * min(below + at, above + at))
        # z = Φ⁻¹(mid-p), from the shorter tail (1 − a tiny upper tail would round to 1)
        if below <= above:
            return p, float(_special.ndtri(max(below + at / 2, 1e-300)))
        return p, float(-_special.ndtri(max(above + at / 2, 1e-300)))

    p, z = tails(low)
    if k > low:
        frac = k - low
        p_high, z_high = tails(low + 1)
        p, z = (1 - frac) * p + frac * p_high, (1 - frac) * z + frac * z_high
    return z, float(p)


#: ``_count_tails`` sums a beta-binomial's pmf within this many standard deviations ...
TAIL_SPAN_SD = 40
#: ... unless the mass beyond them may exceed this
TAIL_SPAN_SLACK = 1e-9


def _count_tails(ks: tuple[int, ...], n: int, mu: float, size: float) -> list[tuple[float, float, float]]:
    """(P(K < k), P(K = k), P(K > k)) for each k of ``ks``, of a beta-binomial count of ``n`` trials whose share is
    Beta(mu·size, (1 − mu)·size), binomial(n, mu) when ``size`` is infinite — what ``scipy.stats.betabinom`` gives,
    each tail summed directly in log space rather than as one minus the other (scipy's distribution objects cost
    about a millisecond a call). The pmf is computed once for every k: with the question adjustment n is up to 100
    times a window's traces, and the two whole numbers either side of an adjusted count took half a second of a check
    over 10 M traces when each computed its own. It is summed over the counts within ``TAIL_SPAN_SD`` standard
    deviations of the mean and of the ``ks`` (over 0 … n when the mass beyond that span may exceed
    ``TAIL_SPAN_SLACK``): at 10 M traces a window's n was up to a million and the whole pmf 0.4 s of a check."""
    if math.isinf(size):
        out = []
        for k in ks:
            below = float(_special.bdtr(k - 1, n, mu)) if k > 0 else 0.0
            above = float(_special.bdtrc(k, n, mu)) if k < n else 0.0
            out.append((below, max(0.0, 1.0 - below - above), above))
        return out
    a, b = mu * size, (1 - mu) * size
    sd = math.sqrt(n * mu * (1 - mu) * (size + n) / (size + 1))
    lo = max(0, math.floor(min(min(ks), n * mu) - TAIL_SPAN_SD * sd))
    hi = min(n, math.ceil(max(max(ks), n * mu) + TAIL_SPAN_SD * sd))
    pmf = _beta_binomial_pmf(np.arange(lo, hi + 1), n, a, b)
    # beyond a span that holds the mode the pmf only falls: the mass outside is at most its edges' times their reach
    # (a J-shaped beta, a < 1 or b < 1, has a mode at 0 or n: the span must reach it)
    outside = (float(pmf[0]) * lo if lo > 0 else 0.0) + (float(pmf[-1]) * (n - hi) if hi < n else 0.0)
    if (a < 1 and lo > 0) or (b < 1 and hi < n) or outside > TAIL_SPAN_SLACK:
        lo, pmf = 0, _beta_binomial_pmf(np.arange(0, n + 1), n, a, b)
    return [(float(pmf[:k - lo].sum()), float(pmf[k - lo]), float(pmf[k - lo + 1:].sum())) for k in ks]


def _beta_binomial_pmf(j: np.ndarray, n: int, a: float, b: float) -> np.ndarray:
    return np.exp(_special.gammaln(n + 1) - _special.gammaln(j + 1) - _special.gammaln(n - j + 1)
                  + _special.betaln(j + a, n - j + b) - _special.betaln(a, b))


def _level_index(level: float) -> int:
    return int(round(min(max(level, 0.0), 1.0) * (len(LEVELS) - 1)))
