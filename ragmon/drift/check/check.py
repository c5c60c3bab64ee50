"""One drift check: every group × feature × test, decided together, stored in ``drift_checks``, exported.

``DriftChecker.run_once`` summarises every window of the reference period and the current window in
ClickHouse (``query``), assesses them (``assess``: window tests against the natural spread between windows,
Benjamini–Hochberg within each stratum, the CUSUM of each feature), writes one row per result with every
parameter applied and the drift settings it ran with (``ragmon.drift.check.applied``), and publishes the
``ragmon_drift_*`` gauges (``export``), including when each feature family of each group was last assessed
(``RagmonDriftBlind``). ``evaluate(at)`` is the same check as it would have run at another time, neither
stored nor exported (``drift check --at``); ``ragmon.drift.backtest.backtest`` replays it over a range. The clock is
injected.
"""

from __future__ import annotations

import logging
import math
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

from ragmon.config import DriftSettings
from ragmon.drift.check.applied import record
from ragmon.drift.check.export import export
from ragmon.drift.check.queries import DriftStore, assessed_since, write_check
from ragmon.drift.check.replay import ZReuse
from ragmon.drift.check.result import CheckResult, details_json, to_result
from ragmon.drift.check.watch import Looked
from ragmon.drift.check.watch import look as watch_look
from ragmon.drift.check.window_queries import Group, Windowed, aggregate, to_series
from ragmon.drift.method.assess import Detector, Entry, assess
from ragmon.drift.method.features import FEATURES, FeaturePlan, plan_features
from ragmon.drift.method.windows import WindowPlan, plan
from ragmon.drift.metrics import DriftMetrics
from ragmon.telemetry import Telemetry
from ragmon.tracing import span

log = logging.getLogger("ragmon.drift")
Clock = Callable[[], datetime]
GroupKey = tuple[str, str, str, str]
#: (retriever name, version, variant, stratum, feature family): what RagmonDriftBlind watches
BlindKey = tuple[str, str, str, str, str]


def utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True, slots=True)
class Page:
    """A feature paging now: when the page was raised, the shift's estimated onset, and what raised it (``watch``: a
    look at the window in progress; ``cusum``: persistent drift at a check)."""

    raised_at: datetime
    onset: datetime
    source: str


@dataclass(frozen=True, slots=True)
class LookResult:
    """One look at the windows in progress since the check at ``since``, at ``at``."""

    since: datetime
    at: datetime
    looked: tuple[Looked, ...]
    duration_seconds: float

    @property
    def alarms(self) -> tuple[Looked, ...]:
        return tuple(x for x in self.looked if x.alarm)


class DriftChecker:
    """Runs drift checks against a store. Not thread-safe: one check at a time."""

    def __init__(self, store: DriftStore, settings: DriftSettings, telemetry: Telemetry | None = None,
                 clock: Clock = utc_now):
        self.store = store
        self.settings = settings
        self.plans = plan_features(settings)  # ConfigError at start-up, not mid-check
        self.clock = clock
        #: drift's metrics, registered on ``telemetry`` when given (None: a check that exports nothing)
        self.metrics = telemetry.use(DriftMetrics) if telemetry is not None else None
        #: features paging now, with when and how the page was raised (the watch's until the next check)
        self._pages: dict[tuple[Group, str], Page] = {}
        #: the last look's results (cleared by a check)
        self._watched: dict[object, Looked] = {}
        if self.metrics is not None:
            self.metrics.drift_blind_after.set(settings.blind_after_seconds)

    def run_once(self) -> CheckResult:
        with span("ragmon.drift.check.check") as current:
            result = self._run_once()
            current.set_attributes({"ragmon.drift.results": len(result.results),
                                    "ragmon.drift.drifted": len(result.drifted),
                                    "ragmon.drift.persistent": len(result.persistent),
                                    "ragmon.drift.groups_dropped": result.groups_dropped})
            return result

    def evaluate(self, at: datetime, *, reuse: ZReuse | None = None) -> CheckResult:
        """The check as it would have run at ``at``: nothing stored, nothing exported. ``reuse``: a replay's z-scores
        of the previous check, taken where the windows are the same (``ragmon.drift.check.replay``; same result)."""
        started = time.monotonic()
        result = self._check(at, reuse)
        return CheckResult(result.check_id, result.checked_at, result.results, time.monotonic() - started,
                           result.groups_dropped, result.last_assessed, result.looked)

    def _run_once(self) -> CheckResult:
        started = time.monotonic()
        try:
            result = self._check(self.clock())
            result = CheckResult(result.check_id, result.checked_at, result.results, time.monotonic() - started,
                                 result.groups_dropped, self._last_assessed(result), result.looked)
            self._store(result)
            self._after_check(result)
        except Exception:
            if self.metrics is not None:
                self.metrics.drift_checks.labels(outcome="error").inc()
            raise
        if self.metrics is not None:
            export(self.metrics, result.results, result.last_assessed)
            cusums = [r.cusum_threshold for r in result.results if math.isfinite(r.cusum_threshold)]
            self.metrics.drift_cusum_threshold.set(cusums[0] if cusums else math.nan)
            self.metrics.drift_last_check.set(result.checked_at.timestamp())
            self.metrics.drift_check_duration.set(result.duration_seconds)
            self.metrics.drift_checks.labels(outcome="ok").inc()
        return result

    def detector(self, wp: WindowPlan) -> Detector:
        seq = self.settings.sequential
        return Detector(reference=wp.reference, period=wp.period, lookback=wp.lookback, k=seq.k,
                        false_alarms_per_day=seq.false_alarms_per_day, windows_per_day=wp.windows_per_day,
                        max_pool=self.settings.max_pool_windows, arl_margin=seq.arl_margin)

    def entries(self, now: datetime, *,
                since: datetime | None = None) -> tuple[list[Entry], dict[int, WindowPlan], int]:
        """Query every window a check at ``now`` needs — traces, scores and corpus versions timestamped before
        ``now`` — and build the entries to assess; also each entry's window plan (by ``id``) and how many groups
        were dropped. With ``since`` (the last check), a look at ``now``: window 0 is the window in progress since
        ``since`` (ending one window length after it) with the traces before ``now``, and no CUSUM look-back is
        read."""
        by_windows: dict[str, list[FeaturePlan]] = defaultdict(list)
        for fp in self.plans:
            by_windows[fp.windows.model_dump_json()].append(fp)
        entries: list[Entry] = []
        plans: dict[int, WindowPlan] = {}
        dropped_total = 0
        lookback = self.settings.sequential.lookback_windows
        for feature_plans in by_windows.values():
            windows = feature_plans[0].windows
            if since is None:
                wp = plan(windows, now, lookback=lookback)
            else:
                wp = plan(windows, since + timedelta(seconds=windows.current_seconds), lookback=0, until=now)
            windowed = aggregate(self.store, [p.feature for p in feature_plans], wp,
                                 index_lag_seconds=self.settings.index_lag_seconds, by_query=self.settings.by_query,
                                 clusters=self.settings.questions_as_clusters,
                                 sketched=sketched(feature_plans))
            windowed, dropped = self._cap_groups(windowed)
            dropped_total = max(dropped_total, dropped)
            detector = self.detector(wp)
            if since is not None:  # the check's guard band (set by its look-back), though no look-back is read
                detector = replace(detector, lookback=lookback)
            length = wp.reference + 1 if wp.pinned else wp.history
            by_name = {p.feature.name: p for p in feature_plans}
            for (group, name), by_w in sorted(windowed.items(), key=lambda kv: kv[0]):
                fp = by_name[name]
                entry = Entry((group, name), fp.tests, to_series(by_w, fp.feature.kind, length), detector,
                              stratum=_group_key(group))
                entries.append(entry)
                plans[id(entry)] = wp
        return entries, plans, dropped_total

    @property
    def cusum_budget(self) -> float:
        """False alarms a day the CUSUM may raise: the paging budget less the watch's share."""
        seq, watch = self.settings.sequential, self.settings.watch
        return seq.false_alarms_per_day * ((1 - watch.budget_share) if watch.enabled else 1.0)

    @property
    def watch_budget(self) -> float:
        """False alarms a day the looks at the window in progress may raise (0 when the watch is off)."""
        seq, watch = self.settings.sequential, self.settings.watch
        return seq.false_alarms_per_day * watch.budget_share if watch.enabled else 0.0

    def look(self, since: datetime, at: datetime) -> LookResult:
        """A look at ``at`` at the windows in progress since the check at ``since`` (``drift.check.watch``): their
        traces so far against the same reference as the coming check. Neither stored nor exported (``look_once``
        is)."""
        started = time.monotonic()
        entries, plans, _ = self.entries(at, since=since)
        looked = watch_look(entries, elapsed_seconds=(at - since).total_seconds(),
                            interval_seconds=self.settings.watch.interval_seconds,
                            false_alarms_per_day=self.watch_budget)
        return LookResult(since, at, tuple(looked), time.monotonic() - started)

    def look_once(self, since: datetime) -> LookResult:
        """Look now (the injected clock) and publish the watch gauges; a look's alarm holds until the next check."""
        at = self.clock()
        try:
            result = self.look(since, at)
        except Exception:
            if self.metrics is not None:
                self.metrics.drift_looks.labels(outcome="error").inc()
            raise
        self._watched = {x.key: x for x in result.looked}
        for x in result.looked:
            if x.alarm and x.key not in self._pages:
                self._pages[x.key] = Page(at, since, "watch")  # type: ignore[index]
        if self.metrics is not None:
            self._publish_watch(at)
            self.metrics.drift_last_look.set(at.timestamp())
            self.metrics.drift_looks.labels(outcome="ok").inc()
        return result

    def _after_check(self, result: CheckResult) -> None:
        """A check closes the window the looks watched: their alarms end; persistent drift and the final look's
        alarms page (each kept with when it was first raised, by a look or an earlier check) until the next check."""
        persistent = {(r.group, r.feature): r for r in result.results if r.persistent}
        final = {x.key: x for x in result.looked if x.alarm}
        pages = {}
        for key in persistent.keys() | final.keys():
            page = self._pages.get(key)  # type: ignore[arg-type]
            if page is None and key in persistent:
                r = persistent[key]
                onset = result.checked_at - timedelta(seconds=r.window_seconds * max(1, r.cusum_run) * r.pooled)
                page = Page(result.checked_at, onset, "cusum")
            elif page is None:
                x = final[key]
                page = Page(result.checked_at, result.checked_at - timedelta(seconds=x.elapsed_seconds), "watch")
            pages[key] = page
        self._pages = pages  # type: ignore[assignment]
        self._watched = {x.key: x for x in result.looked}
        if self.metrics is not None:
            self._publish_watch(result.checked_at)

    def _publish_watch(self, now: datetime) -> None:
        assert self.metrics is not None
        t = self.metrics
        series: dict = {t.drift_watch_alarm: {}, t.drift_watch_statistic: {}, t.drift_watch_boundary: {},
                        t.drift_time_to_page: {}}
        for (group, feature), x in self._watched.items():  # type: ignore[misc]
            base = (group.retriever, group.variant, group.stratum, feature)
            page = self._pages.get((group, feature))
            series[t.drift_watch_alarm][base] = 1.0 if page is not None and page.source == "watch" else 0.0
            series[t.drift_watch_statistic][base] = x.z if math.isfinite(x.z) else math.nan
            series[t.drift_watch_boundary][base] = x.boundary_z
        for (group, feature), page in self._pages.items():  # type: ignore[misc]
            base = (group.retriever, group.variant, group.stratum, feature)
            if page.source == "watch":
                series[t.drift_watch_alarm][base] = 1.0
            series[t.drift_time_to_page][base] = (page.raised_at - page.onset).total_seconds()
        t.drift_watch_gauges.publish(series)

    def _check(self, now: datetime, reuse: ZReuse | None = None) -> CheckResult:
        check_id = uuid.uuid4().hex
        entries, plans, dropped = self.entries(now)
        seq = self.settings.sequential
        assessed = assess(entries, Detector(k=seq.k, false_alarms_per_day=self.cusum_budget,
                                           arl_margin=seq.arl_margin),
                          cache=reuse.advance(entries, plans) if reuse is not None else None)
        by_key = {e.key: plans[id(e)] for e in entries}
        results = tuple(to_result(check_id, now, a, by_key[a.key]) for a in assessed)
        # the watch's final look, on the complete window: it spends what the window's looks left of its budget
        looked = tuple(watch_look(entries, elapsed_seconds=None, interval_seconds=self.settings.watch.interval_seconds,
                                  false_alarms_per_day=self.watch_budget)) if self.settings.watch.enabled else ()
        return CheckResult(check_id, now, results, 0.0, dropped, looked=looked)

    def _cap_groups(self, windowed: Windowed) -> tuple[Windowed, int]:
        """Keep the ``max_groups`` busiest groups (bounded label cardinality); count the rest."""
        size: dict[GroupKey, int] = defaultdict(int)
        for (g, _), by_w in windowed.items():
            key = _group_key(g)
            size[key] = max(size[key], sum(s.n for s in by_w.values()))
        keep = set(sorted(size, key=lambda k: (-size[k], k))[: self.settings.max_groups])
        if len(keep) < len(size):
            log.warning("drift: %d groups over drift.max_groups=%d were not checked", len(size) - len(keep),
                        self.settings.max_groups)
        return {k: v for k, v in windowed.items() if _group_key(k[0]) in keep}, len(size) - len(keep)

    def _last_assessed(self, result: CheckResult) -> dict[BlindKey, datetime]:
        """When each feature family of each group of this check was last assessed: now, or from earlier checks
        (``drift_checks``), or — never assessed — the first check that saw it (so a new low-traffic group turns
        blind after ``blind_after_seconds`` too). Per family (``features.FAMILIES``): one trace an hour never lets
        a score or rate be assessed, while the chunks of six such hours let newest_version_share be."""
        now = result.checked_at
        families = {_blind_key(r.group, r.feature) for r in result.results}
        assessed_now = {_blind_key(r.group, r.feature) for r in result.results if r.assessed}
        out = {k: now for k in assessed_now}
        waiting = families - assessed_now
        if not waiting:
            return out
        rows = assessed_since(self.store, now - timedelta(seconds=4 * self.settings.blind_after_seconds))
        last_ok: dict[BlindKey, datetime] = {}
        first_seen: dict[BlindKey, datetime] = {}
        for r in rows:
            feature = FEATURES.get(str(r["feature"]))
            if feature is None:  # a feature this version no longer has
                continue
            key = (str(r["retriever_name"]), str(r["retriever_version"]), str(r["variant"]), str(r["category"]),
                   feature.family)
            if int(r["n_ok"]):
                last_ok[key] = max(last_ok.get(key, _utc(r["last_ok"])), _utc(r["last_ok"]))
            first_seen[key] = min(first_seen.get(key, _utc(r["first_seen"])), _utc(r["first_seen"]))
        for k in waiting:
            out[k] = last_ok.get(k) or first_seen.get(k, now)
        return out

    def _store(self, result: CheckResult) -> None:
        settings = record(self.settings)
        rows = [[r.check_id, r.checked_at, r.group.retriever_name, r.group.retriever_version, r.group.variant,
                 r.group.stratum, r.feature, r.test, r.statistic, r.p_value, r.p_adjusted, r.effect, r.threshold,
                 r.effect_threshold, int(r.drifted), r.reference.n, r.current.n, r.windows.reference.start,
                 r.windows.reference.end, r.windows.current.start, r.windows.current.end, details_json(r), r.status,
                 r.pooled, r.cusum, r.cusum_threshold, int(r.persistent), settings]
                for r in result.results]
        write_check(self.store, rows)  # in queries.WRITTEN's column order


#: the tests that read only a window's count and moments (or count of events); any other reads its quantiles
MOMENT_TESTS = frozenset({"window_mean", "window_rate"})


def sketched(plans: Iterable[FeaturePlan]) -> set[str]:
    """The features whose every window needs a quantile sketch: a test of theirs reads quantiles (and then the CUSUM
    may accumulate their median, ``assess.cusum_planned``)."""
    return {fp.feature.name for fp in plans if any(t.test.name not in MOMENT_TESTS for t in fp.tests)}


def _group_key(g: Group) -> GroupKey:
    return (g.retriever_name, g.retriever_version, g.variant, g.stratum)


def _blind_key(g: Group, feature: str) -> BlindKey:
    return (*_group_key(g), FEATURES[feature].family)


def _utc(t: datetime) -> datetime:
    return t.replace(tzinfo=UTC) if t.tzinfo is None else t


def _iso(t: datetime) -> str:
    return _utc(t).strftime("%Y-%m-%dT%H:%M:%SZ")
