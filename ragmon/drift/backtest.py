"""Replaying the drift detector over stored history: how often it would have alarmed, and when.

``backtest(checker, start, end)`` reads every window the range needs in one query per source (the checks'
history plus the range), then runs the live check's assessment (``assess``: window tests, BH over each check,
the CUSUM) at every window end in ``(start, end]``, newest window computed once and reused by every later check.
Per (group, feature) it counts the checks that assessed it, the checks whose per-check verdict declared drift,
and the onsets of persistent drift (the CUSUM crossing its threshold, which is what pages), with their times.

This is how a team tunes ``drift.alpha``, ``drift.sequential.*`` and the windows on its own traffic before it
turns paging on, and how it measures the false-alarm rate it gets. Features whose window length differs from
``drift.windows.current_seconds`` are left out and named. Reads only: nothing is stored or exported.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from ragmon.drift.assess import Detector, ZCache, assess
from ragmon.drift.check import DriftChecker
from ragmon.drift.query import Group

#: the times listed per feature (the counts are complete)
MAX_TIMES = 20


@dataclass
class FeatureBacktest:
    """One (group, feature) over the range."""

    group: Group
    feature: str
    assessed: int = 0
    not_assessed: int = 0
    drifted: int = 0
    persistent_onsets: int = 0
    drift_times: list[datetime] = field(default_factory=list)
    persistent_times: list[datetime] = field(default_factory=list)

    def as_dict(self) -> dict[str, object]:
        g = self.group
        return {"retriever": g.retriever, "variant": g.variant, "stratum": g.stratum,
                "judge_fingerprint": g.judge_fingerprint, "feature": self.feature, "assessed": self.assessed,
                "not_assessed": self.not_assessed, "drifted": self.drifted,
                "persistent_onsets": self.persistent_onsets,
                "drift_times": [t.isoformat() for t in self.drift_times],
                "persistent_times": [t.isoformat() for t in self.persistent_times]}


@dataclass
class BacktestResult:
    start: datetime
    end: datetime
    window_seconds: int
    checks: int = 0
    checks_with_drift: int = 0
    checks_with_persistent: int = 0
    features: list[FeatureBacktest] = field(default_factory=list)
    skipped_features: list[str] = field(default_factory=list)
    parameters: dict[str, object] = field(default_factory=dict)

    @property
    def days(self) -> float:
        return self.checks * self.window_seconds / 86400

    def as_dict(self) -> dict[str, object]:
        return {"start": self.start.isoformat(), "end": self.end.isoformat(), "window_seconds": self.window_seconds,
                "checks": self.checks, "checks_with_drift": self.checks_with_drift,
                "checks_with_persistent_drift": self.checks_with_persistent,
                "persistent_onsets_per_day": (sum(f.persistent_onsets for f in self.features) / self.days
                                              if self.days else None),
                "parameters": self.parameters, "skipped_features": self.skipped_features,
                "features": [f.as_dict() for f in self.features]}


def backtest(checker: DriftChecker, start: datetime, end: datetime,
             progress: Callable[[int, int], None] | None = None) -> BacktestResult:
    """Replay the checker's detector at every window end in ``(start, end]``. Raises ``ValueError`` for an empty
    range."""
    length = checker.settings.windows.current_seconds
    checks = math.floor((end - start).total_seconds() / length)
    if checks < 1:
        raise ValueError(f"the range {start.isoformat()} … {end.isoformat()} holds no whole window of {length} s")
    skipped = sorted({p.feature.name for p in checker.plans if p.windows.current_seconds != length})
    seq = checker.settings.sequential
    result = BacktestResult(start, end, length, skipped_features=skipped, parameters={
        "alpha": checker.settings.alpha, "false_alarms_per_day": seq.false_alarms_per_day, "k": seq.k,
        "lookback_windows": seq.lookback_windows, "arl_margin": seq.arl_margin, "reference_days": checker.settings.windows.reference_days,
        "same_hours": checker.settings.windows.same_hours})
    entries, _, _ = checker.entries(end, extra_lookback=checks - 1)
    entries = [e for e in entries if e.key[1] not in skipped]  # type: ignore[index]
    per: dict[tuple[Group, str], FeatureBacktest] = {}
    was_persistent: set[tuple[Group, str]] = set()
    cache: ZCache = {}
    detector = Detector(k=seq.k, false_alarms_per_day=seq.false_alarms_per_day, arl_margin=seq.arl_margin)
    for done, current in enumerate(range(checks - 1, -1, -1), start=1):
        at = end - timedelta(seconds=length * current)
        assessed = assess(entries, detector, current=current, cache=cache)
        result.checks += 1
        drifted_now: set[tuple[Group, str]] = set()
        assessed_now: set[tuple[Group, str]] = set()
        persistent_now: set[tuple[Group, str]] = set()
        seen: set[tuple[Group, str]] = set()
        for a in assessed:
            key = a.key  # (group, feature)
            seen.add(key)  # type: ignore[arg-type]
            if a.decision.status == "ok":
                assessed_now.add(key)  # type: ignore[arg-type]
            if a.decision.drifted:
                drifted_now.add(key)  # type: ignore[arg-type]
            if a.cusum is not None and a.cusum.alarm:
                persistent_now.add(key)  # type: ignore[arg-type]
        for key in seen:
            f = per.get(key)
            if f is None:
                f = per[key] = FeatureBacktest(key[0], key[1])
            if key in assessed_now:
                f.assessed += 1
            else:
                f.not_assessed += 1
            if key in drifted_now:
                f.drifted += 1
                if len(f.drift_times) < MAX_TIMES:
                    f.drift_times.append(at)
        for key in persistent_now - was_persistent:
            f = per[key]
            f.persistent_onsets += 1
            if len(f.persistent_times) < MAX_TIMES:
                f.persistent_times.append(at)
        was_persistent = persistent_now
        result.checks_with_drift += bool(drifted_now)
        result.checks_with_persistent += bool(persistent_now)
        if progress is not None:
            progress(done, checks)
    result.features = sorted(per.values(), key=lambda f: (f.group, f.feature))
    return result


def by_group(result: BacktestResult) -> dict[Group, list[FeatureBacktest]]:
    out: dict[Group, list[FeatureBacktest]] = defaultdict(list)
    for f in result.features:
        out[f.group].append(f)
    return out
