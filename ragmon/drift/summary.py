"""Per-window summaries of one feature: what the drift tests consume.

A ``ContinuousSummary`` is a count, mean, standard deviation and a quantile sketch at fixed ``LEVELS``; a
``RateSummary`` is successes out of trials. ClickHouse computes them (``ragmon.drift.query``); the
``from_samples`` constructors build the same thing from raw values, for tests and the naive benchmark.
Pure data: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: quantile levels of every sketch: 0, 0.01, …, 1 (the min, the percentiles, the max)
LEVELS: tuple[float, ...] = tuple(round(i / 100, 2) for i in range(101))


@dataclass(frozen=True, slots=True)
class ContinuousSummary:
    """``n`` finite values with their mean, population standard deviation and quantiles at ``LEVELS``."""

    n: int
    mean: float
    std: float
    quantiles: tuple[float, ...]

    @classmethod
    def from_samples(cls, values: np.ndarray | list[float]) -> ContinuousSummary:
        a = np.asarray(values, dtype=float)
        a = a[np.isfinite(a)]
        if a.size == 0:
            return cls.empty()
        q = np.quantile(a, LEVELS)
        return cls(int(a.size), float(a.mean()), float(a.std()), tuple(float(v) for v in q))

    @classmethod
    def empty(cls) -> ContinuousSummary:
        return cls(0, float("nan"), float("nan"), ())

    @property
    def value(self) -> float:
        """The headline number (exported as the feature's gauge): the mean."""
        return self.mean


@dataclass(frozen=True, slots=True)
class RateSummary:
    """``k`` successes (e.g. empty shortlists, refusals) out of ``n`` trials."""

    n: int
    k: int

    @classmethod
    def from_samples(cls, flags: np.ndarray | list[bool]) -> RateSummary:
        a = np.asarray(flags, dtype=bool)
        return cls(int(a.size), int(a.sum()))

    @property
    def value(self) -> float:
        return self.k / self.n if self.n else float("nan")


Summary = ContinuousSummary | RateSummary
