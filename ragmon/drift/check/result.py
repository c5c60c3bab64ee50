"""What a drift check produces: one ``DriftResult`` per group × feature × test, and the ``CheckResult`` of a check.

Frozen records carrying every parameter applied (thresholds, minimum samples, windows), so a stored or exported
result says how its verdict was reached, made from an assessed test (``to_result``) and written as the stored row's
``details`` (``details_json``). Pure data: no I/O, no clock. Must not import the checker or the exporter: both
import these records.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from ragmon.drift.check.window_queries import Group
from ragmon.drift.method.assess import Assessed
from ragmon.drift.method.summary import ContinuousSummary, Summary
from ragmon.drift.method.windows import Window, WindowPlan, Windows


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


def to_result(check_id: str, now: datetime, a: Assessed, wp: WindowPlan) -> DriftResult:
    """The stored and exported record of one assessed test."""
    group, feature = a.key  # type: ignore[misc]
    d, planned, c = a.decision, a.planned, a.comparison
    o = d.outcome
    nan = math.nan
    windows = wp.windows
    if a.pooled > 1:  # the current "window" is the last `pooled` windows together
        cur = windows.current
        windows = Windows(windows.reference, Window(cur.end - timedelta(seconds=wp.length * a.pooled), cur.end))
    state = a.cusum
    return DriftResult(
        check_id, now, group, feature, planned.test.name, d.status,
        o.statistic if o else nan, o.p_value if o else nan, d.p_adjusted, o.effect if o else nan,
        planned.test.effect_name, planned.threshold, planned.effect_threshold, planned.min_samples, d.drifted,
        d.reason, c.reference_summary, c.current_summary, windows, a.pooled,
        state.statistic if state else nan, state.h if state else nan, bool(state and state.alarm),
        state.direction if state else "", dict(o.details) if o else {}, state.run if state else 0, wp.length,
    )


def details_json(r: DriftResult) -> str:
    """The ``details`` column: what a report needs beyond the columns (sketches, windows, the test's figures)."""
    def summary(s: Summary) -> dict[str, object]:
        if isinstance(s, ContinuousSummary):
            return {"n": s.n, "mean": _num(s.mean), "std": _num(s.std), "quantiles": [_num(q) for q in s.quantiles]}
        return {"n": s.n, "k": s.k, "rate": _num(s.value)}
    return json.dumps({
        "status": r.status, "reason": r.reason, "effect_name": r.effect_name, "min_samples": r.min_samples,
        "judge_fingerprint": r.group.judge_fingerprint, "reference": summary(r.reference),
        "current": summary(r.current), "reference_window": r.windows.reference.describe(),
        "reference_slices": [[_iso(a), _iso(b)] for a, b in r.windows.reference.slices()],
        "current_window": r.windows.current.describe(), "pooled_windows": r.pooled,
        "cusum": _num(r.cusum), "cusum_threshold": _num(r.cusum_threshold), "persistent": r.persistent,
        "direction": r.direction, "cusum_run": r.cusum_run, "test": _clean(r.details),
    }, allow_nan=False)


def _clean(details: dict[str, object]) -> dict[str, object]:
    out: dict[str, object] = {}
    for key, value in details.items():
        if isinstance(value, float):
            out[key] = _num(value)
        elif isinstance(value, Iterable) and not isinstance(value, str):
            out[key] = [_num(v) if isinstance(v, float) else v for v in value]
        else:
            out[key] = value
    return out


def _num(x: float) -> float | None:
    return float(x) if math.isfinite(x) else None


def _iso(t: datetime) -> str:
    return (t.replace(tzinfo=UTC) if t.tzinfo is None else t).strftime("%Y-%m-%dT%H:%M:%SZ")
