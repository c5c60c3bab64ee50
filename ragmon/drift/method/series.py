"""Per-window summaries of one feature in one group, newest window first, and pooling them.

A drift check compares windows, not traces: the current window with every window of the reference period
before it (``docs/drift.md``, "The window is the unit"). ``Series`` holds one (group, feature)'s per-window
summaries as arrays — index 0 is the newest window, index ``w`` ends ``w`` window lengths before it — so the
window tests (``ragmon.drift.method.baseline``) work on whole histories with numpy, and a backtest slides the
current index along the same arrays.

Pooling: ``pool`` merges windows into one summary (counts and moments exactly; quantile sketches as the
mixture of their CDFs, which is what one sketch over all their traces estimates); ``vincent`` averages the
windows' quantile functions (cheap, for densities); ``blocks(j)`` pools ``j`` consecutive windows into one,
for groups with too little traffic per window. Pure: no I/O, no clock.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ragmon.drift.method.summary import LEVELS, ContinuousSummary, RateSummary, Summary
from ragmon.stats.shift import cdf_from_quantiles

_LEVELS = np.asarray(LEVELS)


@dataclass(frozen=True, slots=True, eq=False)
class Series:
    """One feature's per-window summaries, newest first. ``kind`` is ``continuous`` (``mean``, ``std``, ``q``
    per window; NaN where a window is empty) or ``rate`` (``k`` successes of ``n``, and ``var``, NaN where not
    adjusted for the question)."""

    kind: str
    n: np.ndarray
    mean: np.ndarray | None = None
    std: np.ndarray | None = None
    q: np.ndarray | None = None
    k: np.ndarray | None = None
    var: np.ndarray | None = None  # rates adjusted for the question: Σ p_q(1 − p_q) per window (``RateSummary.var``)
    #: continuous: the window mean's sampling variance with the questions as clusters (``ContinuousSummary.mean_var``),
    #: NaN where not computed
    mean_var: np.ndarray | None = None

    def __len__(self) -> int:
        return int(self.n.size)

    @classmethod
    def from_summaries(cls, summaries: Sequence[Summary]) -> Series:
        """Build from per-window summaries, newest first (all of one kind)."""
        if summaries and all(isinstance(s, RateSummary) for s in summaries):
            return cls("rate", np.array([s.n for s in summaries], dtype=np.int64),
                       k=np.array([s.k for s in summaries], dtype=float),
                       var=np.array([np.nan if s.var is None else s.var for s in summaries], dtype=float))
        if not all(isinstance(s, ContinuousSummary) for s in summaries):
            raise ValueError("a series holds summaries of one kind")
        n = np.array([s.n for s in summaries], dtype=np.int64)
        q = np.full((len(summaries), len(LEVELS)), np.nan)
        for i, s in enumerate(summaries):
            if s.n and len(s.quantiles) == len(LEVELS):
                q[i] = s.quantiles
        mean_var = (np.array([np.nan if s.mean_var is None else s.mean_var for s in summaries], dtype=float)
                    if any(s.mean_var is not None for s in summaries) else None)
        return cls("continuous", n, np.array([s.mean if s.n else np.nan for s in summaries], dtype=float),
                   np.array([s.std if s.n else np.nan for s in summaries], dtype=float), q, mean_var=mean_var)

    @classmethod
    def empty(cls, kind: str, length: int) -> Series:
        if kind == "rate":
            return cls("rate", np.zeros(length, np.int64), k=np.zeros(length), var=np.full(length, np.nan))
        return cls("continuous", np.zeros(length, np.int64), np.full(length, np.nan), np.full(length, np.nan),
                   np.full((length, len(LEVELS)), np.nan))

    def summary(self, index: int) -> Summary:
        """The summary of one window."""
        return self.pool(np.array([index]))

    def pool(self, indices: np.ndarray) -> Summary:
        """One summary of the windows at ``indices`` together (out-of-range indices are ignored)."""
        idx = self._present(indices)
        if self.kind == "rate":
            total = float(self.var[idx].sum()) if self.var is not None and idx.size else math.nan
            var = total if math.isfinite(total) else None  # None: not adjusted (or not every window was)
            return RateSummary(int(self.n[idx].sum()), _whole(float(self.k[idx].sum())), var)  # type: ignore[index]
        if idx.size == 0:
            return ContinuousSummary.empty()
        total, mean, std = self.moments(idx)
        return ContinuousSummary(total, mean, std, _mixture(self.q[idx], self.n[idx].astype(float)))  # type: ignore[index]

    def moments(self, indices: np.ndarray) -> tuple[int, float, float]:
        """(n, mean, standard deviation) of the windows at ``indices`` together (continuous), without the
        quantile mixture ``pool`` computes."""
        idx = self._present(indices)
        if idx.size == 0:
            return 0, float("nan"), float("nan")
        n = self.n[idx].astype(float)
        total = float(n.sum())
        means, stds = self.mean[idx], self.std[idx]  # type: ignore[index]
        mean = float(np.sum(n * means) / total)
        var = float(np.sum(n * (stds ** 2 + (means - mean) ** 2)) / total)
        return int(total), mean, float(np.sqrt(max(var, 0.0)))

    def _present(self, indices: np.ndarray) -> np.ndarray:
        idx = np.asarray(indices, dtype=np.int64)
        idx = idx[(idx >= 0) & (idx < len(self))]
        return idx[self.n[idx] > 0]

    def design_effect(self) -> np.ndarray:
        """Per window, how much larger the variance of its mean is with its questions as clusters than with its
        traces independent, ``mean_var / (std² / n)``, at least 1 (1 where not computed): a window whose traces
        repeat a few questions that share a deviation (a burst of new questions) holds less information than its
        count says. The window tests widen their sampling variance by it (Kish's design effect)."""
        if self.mean_var is None or self.std is None:
            return np.ones(len(self))
        iid = self.std ** 2 / np.maximum(self.n, 1)
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = self.mean_var / iid
        return np.where(np.isfinite(ratio), np.maximum(ratio, 1.0), 1.0)

    def within_variance(self, indices: np.ndarray) -> float:
        """The traces' variance around their own window's mean, pooled over ``indices`` (continuous)."""
        idx = self._present(indices)
        if idx.size == 0:
            return float("nan")
        n = self.n[idx].astype(float)
        return float(np.sum(n * self.std[idx] ** 2) / n.sum())  # type: ignore[index]

    def vincent(self, indices: np.ndarray) -> np.ndarray:
        """The traffic-weighted average of the windows' quantile functions at ``LEVELS`` (continuous)."""
        idx = self._present(indices)
        if idx.size == 0:
            return np.full(len(LEVELS), np.nan)
        n = self.n[idx].astype(float)
        return np.sum(self.q[idx] * n[:, None], axis=0) / n.sum()  # type: ignore[index]

    def blocks(self, size: int) -> Series:
        """Windows pooled ``size`` at a time: block ``b`` holds windows ``[b·size, (b+1)·size)``."""
        if size == 1:
            return self
        count = len(self) // size
        starts = np.arange(count) * size
        pooled = [self.pool(np.arange(s, s + size)) for s in starts]
        if self.kind == "rate" or not pooled:
            return Series.from_summaries(pooled) if pooled else Series.empty(self.kind, 0)
        return Series.from_summaries(pooled)


def _whole(k: float) -> float:
    """A count stays a whole number through sums of whole numbers (an adjusted count need not be one)."""
    return float(round(k)) if abs(k - round(k)) < 1e-9 else k


def _mixture(q: np.ndarray, weights: np.ndarray) -> tuple[float, ...]:
    """Quantiles at ``LEVELS`` of the mixture of the distributions whose quantiles are the rows of ``q``."""
    if q.shape[0] == 1:
        return tuple(float(v) for v in q[0])
    sketched = np.isfinite(q).all(axis=1)  # windows without a sketch (none read, or no traffic) do not count
    if not sketched.any():
        return ()
    q, weights = q[sketched], weights[sketched]
    if q.shape[0] == 1:
        return tuple(float(v) for v in q[0])
    rows = np.maximum.accumulate(q, axis=1)
    grid = np.unique(rows)
    w = weights / weights.sum()
    cdf = np.zeros(grid.size)
    for row, wi in zip(rows, w, strict=True):
        cdf += wi * cdf_from_quantiles(row, _LEVELS, grid)
    cdf = np.maximum.accumulate(np.clip(cdf, 0.0, 1.0))
    out = np.interp(_LEVELS, cdf, grid)
    out[0], out[-1] = rows[:, 0].min(), rows[:, -1].max()
    return tuple(float(v) for v in out)
