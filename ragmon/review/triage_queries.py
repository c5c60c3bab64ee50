"""Negative-feedback triage's SQL, over the review role's one store seam, ``queries.ReviewRows``.

Why this level: selection (``triage.py``), the report (``triage_report.py``) and the pages (``triage_web.py``)
ask a few questions of the store (the week's thumbs-down traces in seeded order and how many there are, a
week's queue with each item's newest cause, the weeks with a queue, is a trace queued, the report's counts per
week, cause and stratum, one stored trace) and write queue and label rows. The functions below are those
questions, so the rest reads as what it does and a reader finds every triage SQL string here. Kept apart from
``queries.py`` (the random sample's statements), as the triage tables are kept apart from the sample's. No in-memory
double: the seeded order and the FINAL reads *are* this SQL, so the tests run it on chDB
(``tests/integration/review/test_triage.py``).

Owns every SQL string of review triage. Every value is a ``{name:Type}`` parameter; the only text formatted in is
table names (``store.table``) and code-constant column lists. Must not validate a label, choose a seed or decide
whether a queue is final.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from ragmon.review.queries import ReviewRows
from ragmon.store.trace_rows import SELECT_TRACE_COLUMNS

_QUEUE_COLUMNS = ["week", "trace_id", "category", "ts", "population", "seed", "selected_by", "selected_at"]
_LABEL_COLUMNS = ["week", "trace_id", "reviewer", "cause", "note", "labelled_at"]


def _thumbs_down_where(store: ReviewRows) -> str:
    # a thumbs-down is the trace's own rating, or a negative `feedback` outcome event for its query (an app that
    # sends feedback later, as schemas/outcome.v1); events are read up to `late` (after the week), for late ones
    return ("ts >= {start:DateTime64(3)} AND ts < {end:DateTime64(3)} AND variant = 'production' "
            "AND (feedback_rating = -1 OR query_id IN (SELECT query_id FROM "
            f"{store.table('outcomes')} FINAL WHERE kind = 'feedback' AND value < 0 "
            "AND time >= {start:DateTime64(3)} AND time < {late:DateTime64(3)}))")


def thumbs_down_count(store: ReviewRows, start: datetime, end: datetime, late: datetime) -> int:
    """Production traces in [start, end) with a thumbs-down (rating, or feedback event before ``late``)."""
    [total] = store.query_rows(f"SELECT count() AS n FROM {store.table('traces')} FINAL "
                               f"WHERE {_thumbs_down_where(store)}", {"start": start, "end": end, "late": late})
    return int(total["n"])


def thumbs_down_first(store: ReviewRows, start: datetime, end: datetime, late: datetime, seed: str,
                      cap: int) -> list[dict[str, Any]]:  # fmt: skip
    """The first ``cap`` of those traces (trace_id, category, ts) in the seeded order ``cityHash64(seed, id)``."""
    return store.query_rows(
        f"SELECT trace_id, category, ts FROM {store.table('traces')} FINAL WHERE {_thumbs_down_where(store)} "
        "ORDER BY cityHash64({seed:String}, trace_id), trace_id LIMIT {cap:UInt32}",
        {"start": start, "end": end, "late": late, "seed": seed, "cap": cap})


def write_queue(store: ReviewRows, rows: list[list[Any]]) -> None:
    """Write triage queue rows (week, trace_id, category, ts, population, seed, selected_by, selected_at)."""
    store.insert_rows("triage_queue", rows, list(_QUEUE_COLUMNS))


def queue_with_causes(store: ReviewRows, week: str) -> list[dict[str, Any]]:
    """The week's queue rows in seeded order, each with its newest label's cause and reviewer ('' when none)."""
    return store.query_rows(
        f"SELECT q.trace_id AS trace_id, q.category AS category, q.ts AS ts, q.population AS population, "
        f"q.seed AS seed, q.selected_at AS selected_at, l.cause AS cause, l.reviewer AS reviewer "
        f"FROM (SELECT * FROM {store.table('triage_queue')} FINAL WHERE week = {{week:String}}) AS q "
        f"LEFT JOIN (SELECT trace_id, argMax(cause, labelled_at) AS cause, argMax(reviewer, labelled_at) AS reviewer "
        f"           FROM {store.table('triage_labels')} FINAL WHERE week = {{week:String}} GROUP BY trace_id) AS l "
        f"ON q.trace_id = l.trace_id ORDER BY cityHash64(q.seed, q.trace_id), q.trace_id",
        {"week": week})  # fmt: skip


def queued_weeks(store: ReviewRows) -> list[str]:
    """Weeks with a triage queue, newest first."""
    rows = store.query_rows(f"SELECT DISTINCT week FROM {store.table('triage_queue')} FINAL ORDER BY week DESC")
    return [r["week"] for r in rows]


def is_queued(store: ReviewRows, week: str, trace_id: str) -> bool:
    """Whether the trace is in the week's triage queue."""
    queued = store.query_rows(f"SELECT count() AS n FROM {store.table('triage_queue')} FINAL "
                              "WHERE week = {week:String} AND trace_id = {t:String}", {"week": week, "t": trace_id})
    return bool(queued and int(queued[0]["n"]))


def write_label(store: ReviewRows, week: str, trace_id: str, reviewer: str, cause: str, note: str,
                at: datetime) -> None:  # fmt: skip
    """Write one triage label row (no validation here)."""
    store.insert_rows("triage_labels", [[week, trace_id, reviewer, cause, note, at]], list(_LABEL_COLUMNS))


def queue_sizes(store: ReviewRows, weeks: Sequence[str]) -> dict[str, dict[str, Any]]:
    """week → {queued, population} for those of ``weeks`` with a queue."""
    return {r["week"]: r for r in store.query_rows(
        f"SELECT week, count() AS queued, max(population) AS population FROM {store.table('triage_queue')} FINAL "
        "WHERE week IN {weeks:Array(String)} GROUP BY week", {"weeks": list(weeks)})}  # fmt: skip


def cause_counts(store: ReviewRows, weeks: Sequence[str]) -> list[dict[str, Any]]:
    """Rows (week, cause, category, n): queued traces of ``weeks`` per newest cause and stratum."""
    queue, labels = store.table("triage_queue"), store.table("triage_labels")
    return store.query_rows(
        f"SELECT l.week AS week, l.cause AS cause, q.category AS category, count() AS n "
        f"FROM (SELECT week, trace_id, argMax(cause, labelled_at) AS cause FROM {labels} FINAL "
        f"      WHERE week IN {{weeks:Array(String)}} GROUP BY week, trace_id) AS l "
        f"INNER JOIN (SELECT week, trace_id, category FROM {queue} FINAL WHERE week IN {{weeks:Array(String)}}) AS q "
        f"ON l.week = q.week AND l.trace_id = q.trace_id GROUP BY week, cause, category",
        {"weeks": list(weeks)})  # fmt: skip


def stored_trace_row(store: ReviewRows, trace_id: str) -> dict[str, Any] | None:
    """The stored trace's row (``SELECT_TRACE_COLUMNS``), or None (never stored, or TTL-deleted)."""
    rows = store.query_rows(f"SELECT {SELECT_TRACE_COLUMNS} FROM {store.table('traces')} FINAL "
                            "WHERE trace_id = {t:String} LIMIT 1", {"t": trace_id})  # fmt: skip
    return rows[0] if rows else None
