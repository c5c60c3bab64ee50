"""What changed: a feature's change in mean between the reference and current windows, explained per dimension.

For one dimension of the traces (document, source, index version, model, question type, …) the traffic falls
into segments s with weights w0, w1 (share of the window's traces) and means m0, m1 in the reference and current
windows. The change of the mean Δ = M1 − M0 splits exactly (Kitagawa's symmetric shift-share decomposition) into

* **mix**    Σ (w1 − w0) · (m̄ − M̄): traffic moved towards segments whose level is below (above) the average;
* **within** Σ w̄ · (m1 − m0): the same segments got worse (better),

with m̄, w̄ the two windows' averages and M̄ = (M0 + M1) / 2 (centering does not change the sums, since the weights
of both windows add up to 1; it makes each segment's mix term say whether moving traffic to it mattered). A
segment present in one window only has no within term (its mean stands for both).

Which dimension says *where* the change is: **explained** by segment s is the share of Δ undone had s behaved as
in the reference — its reference weight and mean, the other segments keeping their current means and sharing the
rest of the traffic as they do now: M1′ = w0·m0 + (1 − w0)·M1₋ₛ, explained = (M1 − M1′) / Δ. A change spread over
every segment alike is undone by restoring s only in proportion to its reference weight, so what ranks is the
**excess** explained − w0: near 0 for a change that has nothing to do with the dimension, near 1 when one segment
holds the whole change (a new index version, a question type that appeared, a model that replaced another). Each
dimension is ranked by the lower end of the excess's interval for its best segment (so a segment carried by a
handful of traces cannot rank first by luck).

Intervals come from a parametric bootstrap of the aggregates (each window's segment counts resampled from a
multinomial, each segment's mean from a normal with its standard error): it treats traces as independent draws,
which production traffic is not (docs/drift.md), so the intervals are narrower than they should be.

Pure: numpy only, every draw from the generator passed in; no I/O, no clock.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

#: how many segments of a dimension are named in a result (the rest are summed in the dimension's totals)
TOP_SEGMENTS = 5
BOOTSTRAP = 400
LEVEL = 0.95
#: a top score below this is what traffic with no incident reaches by chance (bench/drift_explain.py's negative
#: control: at most 0.16 in 25 trials, against medians of 0.43–0.80 under the simulated incidents)
STANDS_OUT = 0.2


@dataclass(frozen=True, slots=True)
class Moments:
    """Count, sum and sum of squares of a feature's finite values in one window of one segment."""

    n: int = 0
    total: float = 0.0
    squares: float = 0.0

    @property
    def mean(self) -> float:
        return self.total / self.n if self.n else math.nan

    @property
    def sd(self) -> float:
        if self.n < 2:
            return 0.0
        return math.sqrt(max(0.0, self.squares / self.n - self.mean ** 2) * self.n / (self.n - 1))


@dataclass(frozen=True, slots=True)
class SegmentInput:
    """One segment of a dimension as ClickHouse summarised it: its value, a readable label (the question text for
    a popular question; else the value) and both windows' moments."""

    value: str
    reference: Moments
    current: Moments
    label: str = ""


@dataclass(frozen=True, slots=True)
class Interval:
    estimate: float
    low: float
    high: float


@dataclass(frozen=True, slots=True)
class SegmentResult:
    """One segment's part of the change: weights and means in both windows (NaN: absent), its mix and within
    terms (adding up over segments to the dimension's), and the share of Δ undone had it not changed."""

    value: str
    label: str
    n_reference: int
    n_current: int
    weight_reference: float
    weight_current: float
    mean_reference: float
    mean_current: float
    mix: float
    within: float
    explained: Interval
    excess: Interval


@dataclass(frozen=True, slots=True)
class DimensionResult:
    """One dimension: the decomposition of Δ (mix + within = delta) and the segments that carry it, best first.
    ``score`` (the lower end of the best segment's excess) is what dimensions are ranked by."""

    dimension: str
    description: str
    delta: float
    mix: Interval
    within: Interval
    segments: tuple[SegmentResult, ...]
    n_segments: int
    score: float

    @property
    def top(self) -> SegmentResult | None:
        return self.segments[0] if self.segments else None


@dataclass(frozen=True, slots=True)
class Explanation:
    """Every dimension's decomposition, ranked (most explaining first), with Δ and its interval."""

    feature: str
    mean_reference: float
    mean_current: float
    delta: Interval
    n_reference: int
    n_current: int
    dimensions: tuple[DimensionResult, ...]
    method: str = "shift-share (Kitagawa) by dimension; counterfactual restore of one segment; parametric bootstrap"

    @property
    def stands_out(self) -> bool:
        """Whether the first dimension scores above what chance reaches (``STANDS_OUT``)."""
        return bool(self.dimensions) and self.dimensions[0].score >= STANDS_OUT


def _arrays(segments: Sequence[SegmentInput], which: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    ms = [getattr(s, which) for s in segments]
    return (np.array([m.n for m in ms], dtype=float), np.array([m.mean for m in ms], dtype=float),
            np.array([m.sd for m in ms], dtype=float))


def _terms(n0: np.ndarray, m0: np.ndarray, n1: np.ndarray, m1: np.ndarray) -> dict[str, np.ndarray]:
    """The decomposition for counts and means of shape (..., S); NaN means where a segment is absent."""
    N0 = n0.sum(axis=-1, keepdims=True)
    N1 = n1.sum(axis=-1, keepdims=True)
    w0 = np.divide(n0, N0, out=np.zeros_like(n0), where=N0 > 0)
    w1 = np.divide(n1, N1, out=np.zeros_like(n1), where=N1 > 0)
    a0 = np.where(n0 > 0, m0, np.where(n1 > 0, m1, 0.0))  # an absent segment's mean stands in from the other window
    a1 = np.where(n1 > 0, m1, a0)
    a0 = np.where(n0 > 0, m0, a1)
    M0 = (w0 * a0).sum(axis=-1, keepdims=True)
    M1 = (w1 * a1).sum(axis=-1, keepdims=True)
    Mbar = (M0 + M1) / 2
    mix = (w1 - w0) * ((a0 + a1) / 2 - Mbar)
    within = (w0 + w1) / 2 * (a1 - a0)
    delta = M1 - M0
    # the current mean without s: (S1 − s1) / (N1 − n1); with no other current traffic, the reference's without s
    s1, S1 = n1 * a1, (n1 * a1).sum(axis=-1, keepdims=True)
    s0, S0 = n0 * a0, (n0 * a0).sum(axis=-1, keepdims=True)
    rest1, rest0 = N1 - n1, N0 - n0
    rest_mean = np.where(rest1 > 0, np.divide(S1 - s1, rest1, out=np.zeros_like(s1), where=rest1 > 0),
                         np.divide(S0 - s0, rest0, out=np.zeros_like(s0), where=rest0 > 0))
    restored = np.where(n0 > 0, w0 * a0, 0.0) + (1 - w0) * rest_mean
    with np.errstate(divide="ignore", invalid="ignore"):
        explained = np.where(delta != 0, (M1 - restored) / delta, 0.0)
    return {"w0": w0, "w1": w1, "M0": M0[..., 0], "M1": M1[..., 0], "delta": delta[..., 0],
            "mix": mix, "within": within, "explained": explained, "excess": explained - w0}


def _resample(rng: np.random.Generator, n: np.ndarray, m: np.ndarray, sd: np.ndarray,
              draws: int) -> tuple[np.ndarray, np.ndarray]:
    total = int(n.sum())
    if total == 0:
        return np.zeros((draws, n.size)), np.full((draws, n.size), np.nan)
    counts = rng.multinomial(total, n / total, size=draws).astype(float)
    se = np.divide(sd, np.sqrt(counts), out=np.zeros_like(counts), where=counts > 0)
    means = np.where(counts > 0, np.nan_to_num(m) + se * rng.standard_normal(counts.shape), np.nan)
    return counts, means


def _interval(point: float, draws: np.ndarray) -> Interval:
    finite = draws[np.isfinite(draws)]
    if finite.size == 0:
        return Interval(point, math.nan, math.nan)
    lo, hi = np.quantile(finite, [(1 - LEVEL) / 2, (1 + LEVEL) / 2])
    return Interval(point, float(lo), float(hi))


def decompose(dimension: str, description: str, segments: Sequence[SegmentInput], rng: np.random.Generator, *,
              draws: int = BOOTSTRAP, top: int = TOP_SEGMENTS) -> DimensionResult:
    """One dimension's decomposition with bootstrap intervals; segments ranked by the lower end of their excess."""
    segments = [s for s in segments if s.reference.n or s.current.n]
    if not segments:
        nan = Interval(math.nan, math.nan, math.nan)
        return DimensionResult(dimension, description, math.nan, nan, nan, (), 0, -math.inf)
    n0, m0, sd0 = _arrays(segments, "reference")
    n1, m1, sd1 = _arrays(segments, "current")
    point = _terms(n0, m0, n1, m1)
    c0, b0 = _resample(rng, n0, m0, sd0, draws)
    c1, b1 = _resample(rng, n1, m1, sd1, draws)
    boot = _terms(c0, b0, c1, b1)
    excess_low = np.nanquantile(np.where(np.isfinite(boot["excess"]), boot["excess"], np.nan), (1 - LEVEL) / 2,
                                axis=0) if draws else point["excess"]
    excess_low = np.where(np.isfinite(excess_low), excess_low, -np.inf)
    order = np.argsort(-excess_low, kind="stable")[:top]
    results = tuple(
        SegmentResult(
            segments[i].value, segments[i].label or segments[i].value, int(n0[i]), int(n1[i]),
            float(point["w0"][i]), float(point["w1"][i]), float(m0[i]) if n0[i] else math.nan,
            float(m1[i]) if n1[i] else math.nan, float(point["mix"][i]), float(point["within"][i]),
            _interval(float(point["explained"][i]), boot["explained"][:, i]),
            _interval(float(point["excess"][i]), boot["excess"][:, i]))
        for i in order)
    # one value throughout (one index version, say): the dimension cannot say where the change is
    constant = len(segments) == 1
    return DimensionResult(
        dimension, description, float(point["delta"]),
        _interval(float(point["mix"].sum()), boot["mix"].sum(axis=-1)),
        _interval(float(point["within"].sum()), boot["within"].sum(axis=-1)),
        results, len(segments), -math.inf if constant else float(excess_low[order[0]]))


def explain(feature: str, dimensions: Sequence[tuple[str, str, Sequence[SegmentInput]]], total_reference: Moments,
            total_current: Moments, rng: np.random.Generator, *, draws: int = BOOTSTRAP) -> Explanation:
    """Every dimension's decomposition, ranked by ``DimensionResult.score`` (best first). ``dimensions``: (name,
    description, segments); the totals are the windows' moments over all traces with a finite value."""
    results = [decompose(name, text, segs, rng, draws=draws) for name, text, segs in dimensions]
    results.sort(key=lambda d: -d.score)
    n0, n1 = total_reference.n, total_current.n
    delta = total_current.mean - total_reference.mean
    se = math.sqrt((total_reference.sd ** 2 / n0 if n0 else math.nan)
                   + (total_current.sd ** 2 / n1 if n1 else math.nan))
    z = 1.959963984540054
    return Explanation(feature, total_reference.mean, total_current.mean,
                       Interval(delta, delta - z * se, delta + z * se), n0, n1, tuple(results))
