"""Reading the review queue: weeks, items with their labels, progress per stratum, one item with its trace.

Shared by the web pages, the JSON API, the gauges and the export. The judge's verdicts are read here from the
``scores`` table, but handing them to a reviewer who has not labelled the item yet is the callers' decision
(they must not: no anchoring). Must not: write anything.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ragmon.review.labels import Label, labels_of_week
from ragmon.review.selection import parse_week
from ragmon.store import SELECT_TRACE_COLUMNS, ClickHouseStore, row_to_trace

NO_STRATUM = "(none)"


@dataclass(frozen=True)
class QueueItem:
    week: str
    trace_id: str
    category: str
    position: int
    labels: tuple[Label, ...] = ()

    def labelled_by(self, reviewer: str) -> bool:
        return any(lab.reviewer == reviewer for lab in self.labels)


@dataclass
class StratumProgress:
    stratum: str
    total: int = 0
    reviewed: int = 0
    mine: int = 0


@dataclass(frozen=True)
class Week:
    week: str
    seed: str
    size: int
    population: int
    items: tuple[QueueItem, ...]

    def reviewers(self) -> dict[str, int]:
        """Reviewer → items of this week they labelled (counts only: no label is revealed)."""
        counts: dict[str, int] = {}
        for item in self.items:
            for lab in item.labels:
                counts[lab.reviewer] = counts.get(lab.reviewer, 0) + 1
        return dict(sorted(counts.items()))

    def progress(self, reviewer: str = "") -> list[StratumProgress]:
        """Per stratum: items, items with at least one label, items this reviewer labelled."""
        by: dict[str, StratumProgress] = {}
        for item in self.items:
            p = by.setdefault(item.category or NO_STRATUM, StratumProgress(item.category or NO_STRATUM))
            p.total += 1
            p.reviewed += bool(item.labels)
            p.mine += item.labelled_by(reviewer)
        return [by[k] for k in sorted(by)]


@dataclass(frozen=True)
class Verdict:
    """One ``scores`` row: a metric a judge (or the metrics library) gave the trace."""

    metric: str
    value: float
    status: str
    error: str
    judge_name: str
    judge_fingerprint: str
    details: Any = field(default=None)


def weeks(store: ClickHouseStore) -> list[str]:
    """Selected weeks, newest first."""
    rows = store.query_rows(f"SELECT week FROM {store.table('review_selections')} FINAL ORDER BY week DESC")
    return [str(r["week"]) for r in rows]


def load_week(store: ClickHouseStore, week: str) -> Week | None:
    """The week's queue with every item's labels, or None if the week was never selected."""
    sel = store.query_rows(
        f"SELECT seed, size, population FROM {store.table('review_selections')} FINAL WHERE week = {{w:String}}",
        {"w": week})
    if not sel:
        return None
    rows = store.query_rows(
        f"SELECT trace_id, category, position FROM {store.table('review_queue')} FINAL "
        "WHERE week = {w:String} ORDER BY position", {"w": week})
    labels = labels_of_week(store, week)
    items = tuple(QueueItem(week, str(r["trace_id"]), str(r["category"]), int(r["position"]),
                            tuple(labels.get(str(r["trace_id"]), ()))) for r in rows)
    s = sel[0]
    return Week(week, str(s["seed"]), int(s["size"]), int(s["population"]), items)


def in_queue(store: ClickHouseStore, week: str, trace_id: str) -> bool:
    return bool(store.query_rows(
        f"SELECT 1 FROM {store.table('review_queue')} WHERE week = {{w:String}} AND trace_id = {{t:String}} LIMIT 1",
        {"w": week, "t": trace_id}))


def _week_bounds(week: str) -> dict[str, Any]:
    start, end = parse_week(week)
    return {"start": start, "end": end}


_IN_WEEK = "ts >= {start:DateTime64(3)} AND ts < {end:DateTime64(3)}"  # prunes partitions: traces are not keyed by id


def load_trace(store: ClickHouseStore, week: str, trace_id: str) -> dict[str, Any] | None:
    """The stored trace (of that week's traffic) as a trace.v1 document, or None (e.g. deleted by the TTL)."""
    rows = store.query_rows(
        f"SELECT {SELECT_TRACE_COLUMNS} FROM {store.table('traces')} FINAL "
        f"WHERE {_IN_WEEK} AND trace_id = {{t:String}} LIMIT 1", {"t": trace_id, **_week_bounds(week)})
    return row_to_trace(rows[0]) if rows else None


def load_verdicts(store: ClickHouseStore, week: str, trace_id: str) -> list[Verdict]:
    """Every judge's current scores of the trace, grouped by judge fingerprint, then metric."""
    rows = store.query_rows(
        "SELECT metric, value, status, error, judge_name, judge_fingerprint, details "
        f"FROM {store.table('scores')} FINAL WHERE {_IN_WEEK} AND trace_id = {{t:String}} "
        "ORDER BY judge_fingerprint, metric", {"t": trace_id, **_week_bounds(week)})
    return [Verdict(str(r["metric"]), float(r["value"]), str(r["status"]), str(r["error"]), str(r["judge_name"]),
                    str(r["judge_fingerprint"]), _details(str(r["details"]))) for r in rows]


def _details(text: str) -> Any:
    if not text:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return text
