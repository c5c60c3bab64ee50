"""The weekly negative-feedback triage report: causes per stratum, this week against the weeks before.

For each (cause, stratum), and each cause over ``ALL`` strata: the count of triaged traces per week (oldest
first, the report's week last) and the trend, the cause's share of the stratum's triaged traces this week minus
its mean share over the earlier weeks that had any, in percentage points. Shares rather than counts carry the
trend because the queue is capped and complaint volume moves with traffic; the counts are shown beside them.
A trace's cause is its newest label. Reads the store (``triage_queries``); writes nothing; rendering is the CLI's.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import asdict, dataclass
from datetime import timedelta
from typing import Any

from ragmon.review import triage_queries as tq
from ragmon.review.queries import ReviewRows
from ragmon.review.records import iso_week, parse_week
from ragmon.review.triage import CAUSES

ALL = "ALL"


@dataclass(frozen=True, slots=True)
class CauseRow:
    cause: str
    stratum: str
    counts: tuple[int, ...]  # per week of ``TriageReport.weeks``
    share: float | None  # of the stratum's triaged traces in the report's week; None when it had none
    trend_pp: float | None  # share minus the mean share of the earlier weeks, in percentage points


@dataclass(frozen=True, slots=True)
class TriageReport:
    weeks: tuple[str, ...]  # oldest first; the last is the report's week
    thumbs_down: tuple[int, ...]  # the week's thumbs-down production traces (the population triage drew from)
    queued: tuple[int, ...]
    triaged: tuple[int, ...]  # queued traces with a cause
    rows: tuple[CauseRow, ...]  # causes in taxonomy order; ALL first, then strata by name

    def as_dict(self) -> dict[str, Any]:
        return {"weeks": list(self.weeks), "thumbs_down": list(self.thumbs_down), "queued": list(self.queued),
                "triaged": list(self.triaged), "rows": [asdict(r) | {"counts": list(r.counts)} for r in self.rows]}


def report_weeks(week: str, n: int) -> tuple[str, ...]:
    """The ``n`` consecutive ISO weeks ending with ``week``, oldest first."""
    start, _ = parse_week(week)
    return tuple(iso_week(start - timedelta(weeks=i)) for i in range(n - 1, -1, -1))


def triage_report(store: ReviewRows, week: str, n_weeks: int = 4) -> TriageReport:
    weeks = report_weeks(week, max(1, n_weeks))
    sizes = tq.queue_sizes(store, weeks)
    counted = tq.cause_counts(store, weeks)
    index = {w: i for i, w in enumerate(weeks)}
    counts: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0] * len(weeks))
    totals: dict[str, list[int]] = defaultdict(lambda: [0] * len(weeks))
    for r in counted:
        i = index[r["week"]]
        for stratum in (r["category"], ALL):
            counts[(r["cause"], stratum)][i] += int(r["n"])
            totals[stratum][i] += int(r["n"])
    order = {c: i for i, c in enumerate(CAUSES)}
    keys = sorted(counts, key=lambda k: (order.get(k[0], len(order)), k[1] != ALL, k[1]))
    rows = tuple(_row(cause, stratum, counts[(cause, stratum)], totals[stratum]) for cause, stratum in keys)
    return TriageReport(weeks, tuple(int(sizes[w]["population"]) if w in sizes else 0 for w in weeks),
                        tuple(int(sizes[w]["queued"]) if w in sizes else 0 for w in weeks),
                        tuple(totals[ALL]) if ALL in totals else (0,) * len(weeks), rows)  # fmt: skip


def _row(cause: str, stratum: str, counts: list[int], totals: list[int]) -> CauseRow:
    shares = [c / t if t else None for c, t in zip(counts, totals, strict=True)]
    share = shares[-1]
    earlier = [s for s in shares[:-1] if s is not None]
    trend = (share - sum(earlier) / len(earlier)) * 100.0 if share is not None and earlier else None
    return CauseRow(cause, stratum, tuple(counts), share, trend)
