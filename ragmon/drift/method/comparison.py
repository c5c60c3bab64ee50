"""What one drift test looks at, and what it says: ``Comparison`` in, ``TestOutcome`` out.

A ``Comparison`` (a feature's window series, which window is current, and its reference) is the input of
every test in the registry. Window tests read the whole reference period
(every window, with its slot in the day) from ``series``; the classic two-sample tests read two pooled
summaries: ``current_summary`` and ``reference_summary`` (the same-slot reference windows pooled, i.e. the
same hour of each previous day — what the check compared before window tests existed).

``guard``: the window tests leave out that many reference windows right after the current one, so a drift
that began a few windows ago does not widen the spread it is judged against. ``pooled`` > 1 means the series is already
in blocks of that many windows (a group with too little traffic per window is assessed over longer spans; the result
says so). Pure.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from ragmon.drift.method.series import Series
from ragmon.drift.method.summary import Summary


@dataclass(frozen=True, slots=True)
class TestOutcome:
    """What one test says about one comparison."""

    statistic: float
    p_value: float
    effect: float
    details: dict[str, object] = field(default_factory=dict)


@dataclass(frozen=True, eq=False)
class Comparison:
    """``series[current]`` against ``series[current + 1 : current + 1 + reference]``, with seasonal slots of
    ``period`` windows. Reference windows with fewer than ``min_window`` observations do not count."""

    series: Series
    current: int = 0
    reference: int = 168
    period: int = 24
    min_window: int = 1
    pooled: int = 1
    guard: int = 0  # reference windows right after the current one that window tests leave out

    @classmethod
    def of_pair(cls, reference: Summary, current: Summary) -> Comparison:
        """Two windows, the current one and one reference (a two-sample test on two summaries)."""
        return cls(Series.from_summaries([current, reference]), 0, 1, 1)

    @property
    def kind(self) -> str:
        return self.series.kind

    @property
    def reference_indices(self) -> np.ndarray:
        return np.arange(self.current + 1, min(self.current + 1 + self.reference, len(self.series)))

    @property
    def same_slot_indices(self) -> np.ndarray:
        """Reference windows at the current window's slot (the same time of day)."""
        idx = self.reference_indices
        return idx[(idx - self.current) % self.period == 0]

    @cached_property
    def counted(self) -> np.ndarray:
        """Per window: does it have enough observations to count (the current one is judged by the caller)."""
        return self.series.n >= max(1, self.min_window)

    @cached_property
    def current_summary(self) -> Summary:
        return self.series.summary(self.current)

    @cached_property
    def reference_summary(self) -> Summary:
        """The same-slot reference windows pooled into one summary."""
        return self.series.pool(self.same_slot_indices)

    @cached_property
    def reference_std(self) -> float:
        """The standard deviation of every reference trace (the scale of effect sizes; continuous)."""
        if self.kind != "continuous":
            return float("nan")
        return self.series.moments(self.reference_indices)[2]
