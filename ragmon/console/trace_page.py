"""One trace as the console shows it: the stored trace, every judge score with its fingerprint, the same query's
other traces (its shadow or canary twin, or the production trace of a shadow one) and the review items it is in.

Owns this page's records (its SQL is in ``queries.py``). A trace is found by id; the page's link carries the
trace's time (``at``) so the read prunes to that day's partitions, and without it the whole table is searched.
Ranked chunks and the answer's citations are laid out by the review UI's ``build_item_view`` (the same reading of a
trace for reviewers and on-call). Its score rows carry the trace's own time (``scores.ts``, as the score role
writes them), so they and the twins are read a day either side of the trace's time, never from the whole table.
Must not render HTML or decide who may see the page.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from ragmon.console.queries import ConsoleReads, review_weeks_of, trace_row, trace_score_rows, twin_rows
from ragmon.review.item_view import ItemView, build_item_view
from ragmon.review.queries import parse_details
from ragmon.review.records import Verdict
from ragmon.store.trace_rows import row_to_trace

#: a trace's link names its time; its row is searched a day either side (ingest clocks and time zones differ)
NEAR = timedelta(days=1)
#: the most twins and review items a page lists
MAX_RELATED = 50


@dataclass(frozen=True)
class Twin:
    trace_id: str
    ts: datetime
    retriever: str
    version: str
    variant: str


@dataclass(frozen=True)
class TracePage:
    trace: dict[str, Any]
    item: ItemView
    scores: list[Verdict]
    twins: list[Twin]
    review_weeks: list[str]


def load_trace_page(store: ConsoleReads, trace_id: str, at: datetime | None) -> TracePage | None:
    """The page of ``trace_id`` (None when it is not stored, or no longer: the retention TTL)."""
    row = trace_row(store, trace_id, at - NEAR if at is not None else None, at + NEAR if at is not None else None)
    if row is None:
        return None
    trace = row_to_trace(row)
    return TracePage(trace, build_item_view(trace), scores(store, trace), twins(store, trace),
                     review_weeks(store, trace_id))


def scores(store: ConsoleReads, trace: dict[str, Any]) -> list[Verdict]:
    """The latest score row per judge fingerprint and metric, by fingerprint then metric: the score rows of the
    trace's id a day either side of its time (a score row's ``ts`` is its trace's)."""
    at = _at(trace)
    rows = trace_score_rows(store, trace["trace_id"], at - NEAR, at + NEAR, MAX_RELATED * 4)
    return [Verdict(str(r["metric"]), float(r["value"]), str(r["status"]), str(r["error"]), str(r["judge_name"]),
                    str(r["judge_fingerprint"]), parse_details(str(r["details"]))) for r in rows]


def _at(trace: dict[str, Any]) -> datetime:
    """The trace's time, naive UTC (as ``DateTime64`` parameters take it)."""
    at = datetime.fromisoformat(trace["timestamp"].replace("Z", "+00:00"))
    return at.astimezone(UTC).replace(tzinfo=None) if at.tzinfo else at


def twins(store: ConsoleReads, trace: dict[str, Any]) -> list[Twin]:
    """The other traces of the same query (shadow mode sends one query to several retrievers), a day either side."""
    at = _at(trace)
    rows = twin_rows(store, trace["query_id"], trace["trace_id"], at - NEAR, at + NEAR, MAX_RELATED)
    return [Twin(str(r["trace_id"]), r["ts"], str(r["retriever_name"]), str(r["retriever_version"]),
                 str(r["variant"])) for r in rows]


def review_weeks(store: ConsoleReads, trace_id: str) -> list[str]:
    """The weeks whose review queue holds the trace (its review item is ``/review/weeks/<week>/items/<id>``)."""
    return review_weeks_of(store, trace_id, MAX_RELATED)
