"""One drift check: every group × feature × test, decided together, stored in ``drift_checks``, exported.

``DriftChecker.run_once`` aggregates both windows in ClickHouse (``query``), runs the registered tests on the
summaries, adjusts p-values across the whole check (``decide``), writes one row per result with the
thresholds and windows applied, and publishes the ``ragmon_drift_*`` gauges (``export``). The clock is
injected. Label sets that disappear from one check to the next are gone from the gauges, never left stale.
"""

from __future__ import annotations

import json
import logging
import math
import time
import uuid
from collections import defaultdict
from collections.abc import Callable
from datetime import UTC, datetime

from ragmon.config import DriftSettings
from ragmon.drift.decide import Candidate, Decision, decide
from ragmon.drift.export import export
from ragmon.drift.features import FeaturePlan, TestPlan, plan_features
from ragmon.drift.query import Aggregates, Group, QueryStore, aggregate
from ragmon.drift.result import CheckResult, DriftResult
from ragmon.drift.summary import ContinuousSummary, Summary
from ragmon.drift.windows import Windows, resolve
from ragmon.telemetry import Telemetry
from ragmon.tracing import span

log = logging.getLogger("ragmon.drift")
Clock = Callable[[], datetime]


def utc_now() -> datetime:
    return datetime.now(UTC)


class DriftChecker:
    """Runs drift checks against a store. Not thread-safe: one check at a time."""

    def __init__(self, store: QueryStore, settings: DriftSettings, telemetry: Telemetry | None = None,
                 clock: Clock = utc_now):
        self.store = store
        self.settings = settings
        self.plans = plan_features(settings)  # ConfigError at start-up, not mid-check
        self.clock = clock
        self.telemetry = telemetry

    def run_once(self) -> CheckResult:
        with span("ragmon.drift.check") as current:
            result = self._run_once()
            current.set_attributes({"ragmon.drift.results": len(result.results),
                                    "ragmon.drift.drifted": len(result.drifted),
                                    "ragmon.drift.groups_dropped": result.groups_dropped})
            return result

    def _run_once(self) -> CheckResult:
        started = time.monotonic()
        try:
            result = self._check()
            duration = time.monotonic() - started
            result = CheckResult(result.check_id, result.checked_at, result.results, duration, result.groups_dropped)
            self._store(result)
        except Exception:
            if self.telemetry is not None:
                self.telemetry.drift_checks.labels(outcome="error").inc()
            raise
        if self.telemetry is not None:
            export(self.telemetry, result.results)
            self.telemetry.drift_last_check.set(result.checked_at.timestamp())
            self.telemetry.drift_check_duration.set(duration)
            self.telemetry.drift_checks.labels(outcome="ok").inc()
        return result

    def _check(self) -> CheckResult:
        now = self.clock()
        check_id = uuid.uuid4().hex
        by_windows: dict[object, list[FeaturePlan]] = defaultdict(list)
        for plan in self.plans:
            by_windows[plan.windows.model_dump_json()].append(plan)
        rows: list[tuple[Group, FeaturePlan, TestPlan, Summary, Summary, Windows]] = []
        dropped_total = 0
        for plans in by_windows.values():
            windows = resolve(plans[0].windows, now)
            aggregates = aggregate(self.store, [p.feature for p in plans], windows)
            aggregates, dropped = self._cap_groups(aggregates)
            dropped_total = max(dropped_total, dropped)
            for plan in plans:
                for (group, name), (ref, cur) in sorted(aggregates.items(), key=lambda kv: kv[0]):
                    if name != plan.feature.name:
                        continue
                    rows.extend((group, plan, tp, ref, cur, windows) for tp in plan.tests)
        decisions = decide([Candidate(tp.test, ref, cur, tp.threshold, tp.effect_threshold, tp.min_samples)
                            for _, _, tp, ref, cur, _ in rows])
        results = tuple(_result(check_id, now, row, d) for row, d in zip(rows, decisions, strict=True))
        return CheckResult(check_id, now, results, 0.0, dropped_total)

    def _cap_groups(self, aggregates: Aggregates) -> tuple[Aggregates, int]:
        """Keep the ``max_groups`` busiest groups (bounded label cardinality); count the rest."""
        size: dict[tuple[str, str, str, str], int] = defaultdict(int)
        for (g, _), (ref, cur) in aggregates.items():
            key = (g.retriever_name, g.retriever_version, g.variant, g.stratum)
            size[key] = max(size[key], ref.n + cur.n)
        keep = set(sorted(size, key=lambda k: (-size[k], k))[: self.settings.max_groups])
        if len(keep) < len(size):
            log.warning("drift: %d groups over drift.max_groups=%d were not checked", len(size) - len(keep),
                        self.settings.max_groups)
        kept = {k: v for k, v in aggregates.items()
                if (k[0].retriever_name, k[0].retriever_version, k[0].variant, k[0].stratum) in keep}
        return kept, len(size) - len(keep)

    def _store(self, result: CheckResult) -> None:
        columns = ("check_id", "checked_at", "retriever_name", "retriever_version", "variant", "category", "feature",
                   "test", "statistic", "p_value", "p_adjusted", "effect", "threshold", "effect_threshold", "drifted",
                   "n_reference", "n_current", "reference_start", "reference_end", "current_start", "current_end",
                   "details")
        rows = [[r.check_id, r.checked_at, r.group.retriever_name, r.group.retriever_version, r.group.variant,
                 r.group.stratum, r.feature, r.test, r.statistic, r.p_value, r.p_adjusted, r.effect, r.threshold,
                 r.effect_threshold, int(r.drifted), r.reference.n, r.current.n, r.windows.reference.start,
                 r.windows.reference.end, r.windows.current.start, r.windows.current.end, _details(r)]
                for r in result.results]
        self.store.insert_rows("drift_checks", rows, columns)


def _result(check_id: str, now: datetime, row: tuple[Group, FeaturePlan, TestPlan, Summary, Summary, Windows],
            d: Decision) -> DriftResult:
    group, plan, tp, ref, cur, windows = row
    o = d.outcome
    nan = math.nan
    return DriftResult(
        check_id, now, group, plan.feature.name, tp.test.name, d.status,
        o.statistic if o else nan, o.p_value if o else nan, d.p_adjusted, o.effect if o else nan,
        tp.test.effect_name, tp.threshold, tp.effect_threshold, tp.min_samples, d.drifted, d.reason, ref, cur, windows,
    )


def _details(r: DriftResult) -> str:
    def summary(s: Summary) -> dict[str, object]:
        if isinstance(s, ContinuousSummary):
            return {"n": s.n, "mean": _num(s.mean), "std": _num(s.std), "quantiles": [_num(q) for q in s.quantiles]}
        return {"n": s.n, "k": s.k, "rate": _num(s.value)}
    return json.dumps({
        "status": r.status, "reason": r.reason, "effect_name": r.effect_name, "min_samples": r.min_samples,
        "judge_fingerprint": r.group.judge_fingerprint, "reference": summary(r.reference),
        "current": summary(r.current), "reference_window": r.windows.reference.describe(),
        "current_window": r.windows.current.describe(),
    }, allow_nan=False)


def _num(x: float) -> float | None:
    return float(x) if math.isfinite(x) else None
