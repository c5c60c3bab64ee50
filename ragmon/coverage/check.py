"""One coverage check: the golden set's question types against live traffic's, per stratum, and its export.

Owns reading a golden case's question type (its first tag in the configured list; a case without one is
counted as untagged and left out), building the per-stratum comparison (``ragmon.coverage.stats``) plus an
``all`` row over every stratum, the exit code, and setting the ``ragmon_golden_coverage_*`` gauges. Traces
without a category form the ``uncategorized`` stratum (the category ``ragmon review export --golden`` gives
their golden cases): compared like any stratum when the golden set has cases of it, otherwise reported as
``no_category`` — in ``all`` only, not a divergence: the golden set cannot hold a case without a category, so
no refresh of it could make such a stratum match. The SQL is ``ragmon.coverage.queries``. Must not classify
traces (the score role does) or write to the store.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from ragmon.contracts.golden import GoldenCase
from ragmon.coverage.metrics import CoverageMetrics
from ragmon.coverage.queries import CoverageStore, latest_fingerprint, type_counts
from ragmon.coverage.stats import (
    DIVERGED,
    NO_CATEGORY,
    NO_GOLDEN,
    TOO_SMALL,
    CoverageThresholds,
    StratumCoverage,
    compare_stratum,
)
from ragmon.judge.classify import closed_list

ALL = "all"
#: exit codes, as ``ragmon shadow compare``'s: 0 the set describes traffic, 1 it no longer does, 4 too little data
EXIT_MATCHES, EXIT_DIVERGED, EXIT_TOO_SMALL = 0, 1, 4
UNCATEGORIZED = "uncategorized"


@dataclass(frozen=True)
class CoverageResult:
    """A coverage check with what it applied: window, classifier fingerprint, types, thresholds."""

    since: datetime
    until: datetime
    fingerprint: str | None
    question_types: tuple[str, ...]
    golden_cases: int
    untagged_cases: int
    strata: tuple[StratumCoverage, ...]

    @property
    def diverged(self) -> tuple[StratumCoverage, ...]:
        return tuple(s for s in self.strata if s.status in (DIVERGED, NO_GOLDEN))

    @property
    def exit_code(self) -> int:
        if self.diverged:
            return EXIT_DIVERGED
        if all(s.status in (TOO_SMALL, NO_CATEGORY) for s in self.strata):
            return EXIT_TOO_SMALL
        return EXIT_MATCHES

    @property
    def uncategorized_traffic(self) -> int:
        """Classified traces without a category that no stratum compared (in ``all`` only)."""
        return sum(s.traffic for s in self.strata if s.status == NO_CATEGORY)

    def under_represented(self) -> tuple[str, ...]:
        """Every type a diverged stratum under-represents, most under-represented first (for golden-set growth)."""
        gaps: dict[str, float] = {}
        for s in self.diverged:
            for share in s.shares:
                if share.question_type in s.under_represented:
                    gaps[share.question_type] = max(gaps.get(share.question_type, 0.0), share.gap)
        return tuple(sorted(gaps, key=lambda t: -gaps[t]))


def golden_type(case: GoldenCase, question_types: Sequence[str]) -> str | None:
    """A golden case's question type: its first tag that is one of ``question_types`` (None: untagged)."""
    return next((t for t in case.tags if t in question_types), None)


def golden_counts(cases: Sequence[GoldenCase], question_types: Sequence[str]) -> tuple[dict[str, Counter], int]:
    """(stratum → question type → cases, untagged cases)."""
    out: dict[str, Counter] = {}
    untagged = 0
    for case in cases:
        qtype = golden_type(case, question_types)
        if qtype is None:
            untagged += 1
            continue
        out.setdefault(case.category, Counter())[qtype] += 1
    return out, untagged


def check_coverage(store: CoverageStore, cases: Sequence[GoldenCase], question_types: Sequence[str], *,
                   until: datetime, window: timedelta, thresholds: CoverageThresholds,
                   fingerprint: str | None = None) -> CoverageResult:
    """Compare per stratum (and ``all``). ``fingerprint`` None: the newest classifier fingerprint in the window."""
    since = until - window
    types = closed_list(question_types)
    golden, untagged = golden_counts(cases, types)
    fp = fingerprint or latest_fingerprint(store, since, until)
    traffic = type_counts(store, fp, since, until) if fp else {}
    traffic = {k or UNCATEGORIZED: v for k, v in traffic.items()}
    strata = [compare_stratum(name, golden.get(name, {}), traffic.get(name, {}), types, thresholds)
              for name in sorted(set(golden) | set(traffic))]
    strata = [replace(s, status=NO_CATEGORY, under_represented=())
              if s.stratum == UNCATEGORIZED and not s.golden_cases and s.traffic else s for s in strata]
    all_golden: Counter = sum(golden.values(), Counter())
    all_traffic: Counter = Counter()
    for counts in traffic.values():
        all_traffic.update(counts)
    strata.append(compare_stratum(ALL, all_golden, all_traffic, types, thresholds))
    return CoverageResult(since, until, fp, types, len(cases), untagged, tuple(strata))


def export(result: CoverageResult, metrics: CoverageMetrics, now: float) -> None:
    """Set the gauges: per stratum its distance and status, per under-represented type its share gap."""
    metrics.coverage_distance.clear()
    metrics.coverage_diverged.clear()
    metrics.coverage_under_represented.clear()
    for s in result.strata:
        if math.isfinite(s.distance):  # a stratum with no golden cases (or no traffic) has no distance
            metrics.coverage_distance.labels(s.stratum).set(s.distance)
        metrics.coverage_diverged.labels(s.stratum).set(1 if s.status in (DIVERGED, NO_GOLDEN) else 0)
        for share in s.shares:
            if share.question_type in s.under_represented:
                metrics.coverage_under_represented.labels(s.stratum, share.question_type).set(share.gap)
    metrics.coverage_last_check.set(now)
