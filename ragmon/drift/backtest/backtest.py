"""Replaying the drift detector over stored history: how often it would have alarmed, and when.

``backtest(checker, start, end)`` runs, at every window end in ``(start, end]``, the check as it would have run
then — ``DriftChecker.evaluate(at)``, exactly what ``drift check --at`` runs and prints — and counts, per (group,
feature), the checks that assessed it, the checks whose per-check verdict declared drift, and the onsets of
persistent drift (the CUSUM crossing its threshold, which is what pages), with their times.

**Only what existed then.** Each replayed check reads what its own check would read: traces, scores and corpus
versions timestamped before the replayed time, and from them its own reference, question levels
(``drift.by_query``), spreads, CUSUM and Benjamini–Hochberg family. Nothing is computed once over the whole
range: an earlier design did (one query for the range, the question levels of the last check's reference week),
and judged earlier hours with later traffic. "Existed" is the trace's own timestamp, not ``ingested_at``: history
loaded afterwards (``ragmon ingest --file``, ``drift simulate``) has an ``ingested_at`` later than every replayed
time, and a check at ``at`` reads the windows before ``at`` by timestamp whenever it runs. The one difference from
the live check is late traffic: a trace stored after ``at`` with a timestamp before it is in the replay of ``at``
but was not in the check the daemon ran then (``drift report --check-id`` shows that one).

**An alarm already active at the start** is not an onset in the range. The replay looks back, one window at a
time, up to ``drift.sequential.lookback_windows`` checks before its first, for the check where the alarm began
(``active_since``); still active at every one of them, it says so (``active_since_before``).

This is how a team tunes ``drift.alpha``, ``drift.sequential.*`` and the windows on its own traffic before it
turns paging on, and how it measures the false-alarm rate it gets. It costs a check's queries per replayed
window; of the assessment, the CUSUM's z-scores of windows the previous check already compared on the same data
are carried over (``ragmon.drift.check.replay``). Reads only: nothing is stored or exported.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from ragmon.drift.check.check import DriftChecker
from ragmon.drift.check.replay import ZReuse
from ragmon.drift.check.result import DriftResult
from ragmon.drift.check.window_queries import Group

#: the times listed per feature (the counts are complete)
MAX_TIMES = 20

Key = tuple[Group, str]


@dataclass
class FeatureBacktest:
    """One (group, feature) over the range. ``active_at_start``: persistent at the range's first check and at the
    check before it; then ``active_since`` is the check where that alarm began, or, when it was persistent at every
    check the replay looked back over, ``active_since_before`` the earliest of them."""

    group: Group
    feature: str
    assessed: int = 0
    not_assessed: int = 0
    drifted: int = 0
    persistent_onsets: int = 0
    #: checks whose final look at the complete window paged (``ragmon.drift.check.watch``; the looks between checks are
    #: not replayed)
    watch_alarms: int = 0
    drift_times: list[datetime] = field(default_factory=list)
    persistent_times: list[datetime] = field(default_factory=list)
    active_at_start: bool = False
    active_since: datetime | None = None
    active_since_before: datetime | None = None

    def as_dict(self) -> dict[str, object]:
        g = self.group
        return {"retriever": g.retriever, "variant": g.variant, "stratum": g.stratum,
                "judge_fingerprint": g.judge_fingerprint, "feature": self.feature, "assessed": self.assessed,
                "not_assessed": self.not_assessed, "drifted": self.drifted,
                "persistent_onsets": self.persistent_onsets, "watch_alarms": self.watch_alarms,
                "drift_times": [t.isoformat() for t in self.drift_times],
                "persistent_times": [t.isoformat() for t in self.persistent_times],
                "active_at_start": self.active_at_start,
                "active_since": self.active_since.isoformat() if self.active_since else None,
                "active_since_before": self.active_since_before.isoformat() if self.active_since_before else None}


@dataclass
class BacktestResult:
    start: datetime
    end: datetime
    window_seconds: int
    checks: int = 0
    checks_with_drift: int = 0
    checks_with_persistent: int = 0
    features: list[FeatureBacktest] = field(default_factory=list)
    parameters: dict[str, object] = field(default_factory=dict)
    #: checks run before the range to find when alarms active at its start began
    lookback_checks: int = 0

    @property
    def days(self) -> float:
        return self.checks * self.window_seconds / 86400

    @property
    def assessed(self) -> int:
        """(check, group, feature) verdicts reached over the range."""
        return sum(f.assessed for f in self.features)

    @property
    def not_assessed(self) -> int:
        return sum(f.not_assessed for f in self.features)

    @property
    def nothing_assessed(self) -> bool:
        """Not one feature of one group could be assessed at any check: the range says nothing about drift."""
        return self.assessed == 0

    def as_dict(self) -> dict[str, object]:
        return {"start": self.start.isoformat(), "end": self.end.isoformat(), "window_seconds": self.window_seconds,
                "checks": self.checks, "checks_with_drift": self.checks_with_drift,
                "checks_with_persistent_drift": self.checks_with_persistent,
                "assessed": self.assessed, "not_assessed": self.not_assessed,
                "nothing_assessed": self.nothing_assessed,
                "persistent_onsets_per_day": (sum(f.persistent_onsets for f in self.features) / self.days
                                              if self.days else None),
                "active_at_start": sum(f.active_at_start for f in self.features),
                "lookback_checks": self.lookback_checks,
                "parameters": self.parameters, "features": [f.as_dict() for f in self.features]}


@dataclass(frozen=True, slots=True)
class Verdicts:
    """One check's verdicts per (group, feature): seen, assessed (any test ran), drifted (any test), persistent."""

    seen: frozenset[Key]
    assessed: frozenset[Key]
    drifted: frozenset[Key]
    persistent: frozenset[Key]

    @classmethod
    def of(cls, results: Iterable[DriftResult]) -> Verdicts:
        seen, assessed, drifted, persistent = set(), set(), set(), set()
        for r in results:
            key = (r.group, r.feature)
            seen.add(key)
            if r.assessed:
                assessed.add(key)
            if r.drifted:
                drifted.add(key)
            if r.persistent:
                persistent.add(key)
        return cls(frozenset(seen), frozenset(assessed), frozenset(drifted), frozenset(persistent))


def backtest(checker: DriftChecker, start: datetime, end: datetime,
             progress: Callable[[int, int], None] | None = None) -> BacktestResult:
    """Replay the checker's check at every window end in ``(start, end]``. Raises ``ValueError`` for an empty
    range."""
    length = checker.settings.windows.current_seconds
    checks = math.floor((end - start).total_seconds() / length)
    if checks < 1:
        raise ValueError(f"the range {start.isoformat()} … {end.isoformat()} holds no whole window of {length} s")
    s = checker.settings
    seq = s.sequential
    result = BacktestResult(start, end, length, parameters={
        "alpha": s.alpha, "false_alarms_per_day": seq.false_alarms_per_day, "k": seq.k,
        "lookback_windows": seq.lookback_windows, "arl_margin": seq.arl_margin,
        "reference_days": s.windows.reference_days, "same_hours": s.windows.same_hours,
        "windows": s.windows.model_dump(mode="json"), "min_samples": s.min_samples, "by_query": s.by_query,
        "features": s.features})
    per: dict[Key, FeatureBacktest] = {}

    def feature(key: Key) -> FeatureBacktest:
        f = per.get(key)
        if f is None:
            f = per[key] = FeatureBacktest(key[0], key[1])
        return f

    step = timedelta(seconds=length)
    times = [end - step * back for back in range(checks - 1, -1, -1)]
    was_persistent: frozenset[Key] = frozenset()
    reuse = ZReuse(length)
    for done, at in enumerate(times, start=1):
        evaluated = checker.evaluate(at, reuse=reuse)
        now = Verdicts.of(evaluated.results)
        for x in evaluated.watch_alarms:
            feature(x.key).watch_alarms += 1
        if done == 1 and now.persistent:
            was_persistent = _look_back(checker, at, step, now.persistent, feature, result)
        result.checks += 1
        for key in now.seen:
            f = feature(key)
            if key in now.assessed:
                f.assessed += 1
            else:
                f.not_assessed += 1
            if key in now.drifted:
                f.drifted += 1
                if len(f.drift_times) < MAX_TIMES:
                    f.drift_times.append(at)
        for key in now.persistent - was_persistent:
            f = feature(key)
            f.persistent_onsets += 1
            if len(f.persistent_times) < MAX_TIMES:
                f.persistent_times.append(at)
        was_persistent = now.persistent
        result.checks_with_drift += bool(now.drifted)
        result.checks_with_persistent += bool(now.persistent)
        if progress is not None:
            progress(done, checks)
    result.features = sorted(per.values(), key=lambda f: (f.group, f.feature))
    return result


def _look_back(checker: DriftChecker, first: datetime, step: timedelta, persistent: frozenset[Key],
               feature: Callable[[Key], FeatureBacktest], result: BacktestResult) -> frozenset[Key]:
    """For the alarms persistent at the range's first check: the checks before it, one window at a time (at most
    ``drift.sequential.lookback_windows``), until each is found not persistent. Marks those active at the start
    with their onset; returns the keys persistent at the check just before the first (not onsets in the range)."""
    bound = checker.settings.sequential.lookback_windows
    active = set(persistent)
    before: frozenset[Key] | None = None
    for back in range(1, bound + 1):
        at = first - step * back
        still = Verdicts.of(checker.evaluate(at).results).persistent & active
        result.lookback_checks += 1
        if before is None:
            before = frozenset(still)
        for key in active - still:
            if key in before:
                f = feature(key)
                f.active_at_start, f.active_since = True, at + step
        active = set(still)
        if not active:
            break
    for key in active:  # persistent at every check looked back over
        f = feature(key)
        f.active_at_start, f.active_since_before = True, first - step * bound
    return before or frozenset()


def by_group(result: BacktestResult) -> dict[Group, list[FeatureBacktest]]:
    out: dict[Group, list[FeatureBacktest]] = defaultdict(list)
    for f in result.features:
        out[f.group].append(f)
    return out
