"""Per-window summaries of one feature: what the drift tests consume.

A ``ContinuousSummary`` is a count, mean, standard deviation and a quantile sketch at fixed ``LEVELS``; a
``RateSummary`` is successes out of trials. ClickHouse computes them (``ragmon.drift.check.window_queries``); the
``from_samples`` constructors build the same thing from raw values, for tests and the naive benchmark.
Pure data: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: quantile levels of every sketch: 0, 0.01, …, 1 (the min, the percentiles, the max)
LEVELS: tuple[float, ...] = tuple(round(i / 100, 2) for i in range(101))


_LEVELS = np.asarray(LEVELS)


def _quantiles(ordered: np.ndarray) -> np.ndarray:
    """``np.quantile(ordered, LEVELS)`` of sorted values, bit for bit (its linear interpolation), without its
    per-call overhead (a tenth of the time on a window of a thousand values)."""
    position = _LEVELS * (ordered.size - 1)
    low = np.floor(position).astype(np.int64)
    high = np.minimum(low + 1, ordered.size - 1)
    t = position - low
    a, b = ordered[low], ordered[high]
    diff = b - a
    return np.where(t >= 0.5, b - diff * (1 - t), a + diff * t)


def clustered_variance(values: np.ndarray, keys: np.ndarray) -> float:
    """The variance of the mean of ``values`` with the values of one key (a question) as one cluster:
    ``Σ_q (Σ_{i∈q} (x_i − x̄))² / n²`` — for values of distinct keys the plain ``Σ (x_i − x̄)² / n²``; values of one
    question that share a deviation (a burst of a new question the reference has no level for) count as one."""
    if values.size == 0:
        return float("nan")
    _, inverse = np.unique(keys, return_inverse=True)
    sums = np.bincount(inverse, weights=values - values.mean())
    return float(np.sum(sums * sums) / values.size ** 2)


@dataclass(frozen=True, slots=True)
class ContinuousSummary:
    """``n`` finite values with their mean, population standard deviation and quantiles at ``LEVELS``."""

    n: int
    mean: float
    std: float
    quantiles: tuple[float, ...]
    #: the sampling variance of the window's mean with its traces' questions as clusters (``clustered_variance``);
    #: None where not computed
    mean_var: float | None = None

    @classmethod
    def from_samples(cls, values: np.ndarray | list[float], *, quantiles: bool = True,
                     keys: np.ndarray | None = None) -> ContinuousSummary:
        """The summary of the finite ``values``: exact quantiles (numpy's default linear interpolation) unless
        ``quantiles`` is false (then none: for simulations whose tests do not read them); with ``keys`` (each
        value's question), ``mean_var``."""
        a = np.asarray(values, dtype=float)
        finite = np.isfinite(a)
        a = a[finite]
        if a.size == 0:
            return cls.empty()
        q = tuple(float(v) for v in _quantiles(np.sort(a))) if quantiles else ()
        mean_var = clustered_variance(a, np.asarray(keys)[finite]) if keys is not None else None
        return cls(int(a.size), float(a.mean()), float(a.std()), q, mean_var)

    @classmethod
    def empty(cls) -> ContinuousSummary:
        return cls(0, float("nan"), float("nan"), ())

    @property
    def value(self) -> float:
        """The headline number (exported as the feature's gauge): the mean."""
        return self.mean


@dataclass(frozen=True, slots=True)
class RateSummary:
    """``k`` successes (e.g. empty shortlists, refusals) out of ``n`` trials.

    Adjusted for the question (``drift.by_query``, ``ragmon.drift.simulation.by_query``), ``k`` is the sum of each
    trace's ``x − level(q) + M`` — not a whole number — and ``var`` the sum of each trace's Bernoulli variance at its
    question's level, ``Σ p_q(1 − p_q)`` (``M(1 − M)`` for a question the reference did not see): a question that
    always returns nothing adds nothing to it. None when not adjusted: each trace then varies as ``p̄(1 − p̄)``."""

    n: int
    k: float
    var: float | None = None

    @classmethod
    def from_samples(cls, flags: np.ndarray | list[bool]) -> RateSummary:
        a = np.asarray(flags, dtype=bool)
        return cls(int(a.size), int(a.sum()))

    @property
    def value(self) -> float:
        return self.k / self.n if self.n else float("nan")


Summary = ContinuousSummary | RateSummary
