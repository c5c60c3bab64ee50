"""What a drift check produces: one ``DriftResult`` per group × feature × test, and the ``CheckResult`` of a check.

Frozen records carrying every parameter applied (thresholds, minimum samples, windows), so a stored or exported
result says how its verdict was reached. Pure data: no I/O, no clock. Must not import the checker or the
exporter: both import these records.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime

from ragmon.drift.check.query import Group
from ragmon.drift.method.summary import Summary
from ragmon.drift.method.windows import Windows


@dataclass(frozen=True, slots=True)
class DriftResult:
    """One test of one feature in one group, with everything that was applied to reach the verdict."""

    check_id: str
    checked_at: datetime
    group: Group
    feature: str
    test: str
    status: str  # ok | insufficient_data | error
    statistic: float
    p_value: float
    p_adjusted: float
    effect: float
    effect_name: str
    threshold: float
    effect_threshold: float
    min_samples: int
    drifted: bool
    reason: str
    reference: Summary
    current: Summary
    windows: Windows
    pooled: int = 1                     # windows pooled into one (a low-traffic group)
    cusum: float = math.nan             # the persistent-drift statistic (the feature's primary test only)
    cusum_threshold: float = math.nan   # its alarm threshold, from drift.sequential.false_alarms_per_day
    persistent: bool = False            # the CUSUM is at or over its threshold
    direction: str = ""                 # up | down: which side the CUSUM accumulates on
    details: dict[str, object] = field(default_factory=dict)  # the test's own figures (baseline, spread, …)
    cusum_run: int = 0                  # windows (blocks) since that side was last 0: the shift's estimated start
    window_seconds: int = 3600          # the length of one window of this feature

    @property
    def assessed(self) -> bool:
        return self.status == "ok"


@dataclass(frozen=True, slots=True)
class CheckResult:
    """Every result of one check, its wall time, how many groups over ``drift.max_groups`` were left out, and
    when each feature family of each group was last assessed."""

    check_id: str
    checked_at: datetime
    results: tuple[DriftResult, ...]
    duration_seconds: float
    groups_dropped: int
    #: (retriever name, version, variant, stratum, feature family) → when a check last assessed a feature of that
    #: family in the group (live checks only; ``features.FAMILIES``)
    last_assessed: dict[tuple[str, str, str, str, str], datetime] = field(default_factory=dict)
    #: the watch's final look at the complete window (``ragmon.drift.check.watch.Looked``; empty with the watch off)
    looked: tuple = ()

    @property
    def watch_alarms(self) -> tuple:
        return tuple(x for x in self.looked if x.alarm)

    @property
    def drifted(self) -> tuple[DriftResult, ...]:
        return tuple(r for r in self.results if r.drifted)

    @property
    def persistent(self) -> tuple[DriftResult, ...]:
        return tuple(r for r in self.results if r.persistent)
