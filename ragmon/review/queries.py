"""The review role's store seam: ``ReviewStore``, what the role reads and writes, and its SQL in one place
(``ClickHouseReviewQueries``).

Why this level: the review code asks business questions (the week's queue, a trace's labels, is this session
signed out) and gets records back (``records.py``), so the pages, the API, selection and export read as what
they do, and a test can stand in with ``in_memory.InMemoryReviewStore``, which answers the same questions from
Python data instead of interpreting SQL. ``tests/contract/test_review_store.py`` runs one suite against both.
Below the seam, ``ClickHouseReviewQueries`` needs only ``table``/``query_rows``/``insert_rows`` of the one
``ClickHouseStore`` (``ReviewRows``).

Owns: every SQL string of the review role and the mapping of rows to records. Values always travel as
``{name:Type}`` parameters; only table names (``store.table``) and column lists, all code constants, are
formatted in. Must not: decide what a reviewer may see, validate a label, or choose a seed.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any, Protocol, runtime_checkable

from ragmon.review.records import Label, SampledTrace, SelectionRecord, Verdict, parse_week
from ragmon.store.trace_rows import SELECT_TRACE_COLUMNS, row_to_trace
from ragmon.where import Where


@runtime_checkable
class ReviewStore(Protocol):
    """What the review role needs from a store. Owned by the review role; ingest and score write the traffic
    (traces, scores) it reads, and nothing else writes the review tables.

    Every method blocks until the store answered and raises ``StoreError`` when it cannot (``retryable`` for an
    outage; the pages and the API turn that into a 503); a read of the traffic raises ``InputError`` for a week
    that is not an ISO week. Thread-safe: the web handlers call it from worker threads. Writes are idempotent
    by key: writing a row again replaces it (queue: week and trace; label: trace and reviewer; selection:
    week; signed-out session: digest), and reads see the latest. Times come back to the millisecond, in UTC
    without tzinfo (how the ClickHouse driver returns a ``DateTime64(3, 'UTC')``).
    """

    # -- the week's traffic (written by ingest and score) ----------------------------------------------------
    def population(self, week: str) -> dict[str, int]:
        """Production traces of the week per category (``''`` for none), each trace counted once."""

    def sample(self, week: str, seed: str, size: int, min_per_stratum: int = 0) -> list[SampledTrace]:
        """The first ``size`` production traces of the week in a pseudo-random order keyed by ``seed`` (the same
        order on every call), positions 0…; with ``min_per_stratum`` the first that many of each category come
        first. Reads neither feedback nor scores."""

    def trace(self, week: str, trace_id: str) -> dict[str, Any] | None:
        """The stored trace of the week's traffic as a trace.v1 document, or None (never stored, or TTL-deleted)."""

    def verdicts(self, week: str, trace_id: str) -> list[Verdict]:
        """The latest score per judge fingerprint and metric of the trace, by fingerprint then metric."""

    # -- selections and the queue ----------------------------------------------------------------------------
    def weeks(self) -> list[str]:
        """Weeks with a recorded selection, newest first."""

    def selection(self, week: str) -> SelectionRecord | None:
        """The week's recorded selection, or None."""

    def queue(self, week: str) -> list[SampledTrace]:
        """The week's queue in position order (empty when none)."""

    def in_queue(self, week: str, trace_id: str) -> bool: ...

    def leftover_seed(self, week: str) -> str | None:
        """The seed of queue rows written without a selection record (a selection that died half-way), or None."""

    def add_to_queue(self, week: str, items: Sequence[SampledTrace], seed: str, selected_at: datetime) -> None: ...

    def record_selection(self, record: SelectionRecord) -> None: ...

    # -- labels ----------------------------------------------------------------------------------------------
    def save_label(self, label: Label) -> None:
        """Store ``label``, replacing its reviewer's earlier label of the trace (no validation here)."""

    def labels_for(self, trace_id: str) -> list[Label]:
        """Every reviewer's latest label of the trace, by time labelled then reviewer."""

    def labels_of_week(self, week: str) -> dict[str, list[Label]]:
        """trace id → labels (as ``labels_for``) of the items in the week's queue that have any."""

    def golden_marked(self, week: str | None = None) -> list[tuple[str, str]]:
        """(week, trace id) of every item a reviewer's latest label marks "add to golden set", sorted; one week
        or all."""

    # -- signed-out sessions ---------------------------------------------------------------------------------
    def sign_out(self, digest: str, username: str, signed_out_at: datetime, expires_at: datetime) -> None: ...

    def is_signed_out(self, digest: str) -> bool: ...


class ReviewRows(Protocol):
    """The review role's one store seam: what ``ClickHouseReviewQueries`` and triage (``triage_queries``) need from
    the store (``ClickHouseStore`` satisfies it). Blocking; raises ``StoreError`` (``retryable`` for an outage);
    thread-safe (the pages call it from worker threads)."""

    def table(self, name: str) -> str: ...
    def query_rows(self, sql: str, parameters: dict[str, Any] | None = None) -> list[dict[str, Any]]: ...
    def insert_rows(self, table: str, rows: Sequence[Sequence[Any]], column_names: Sequence[str],
                    *, dedup_token: str | None = None) -> int: ...


_LABEL_COLUMNS = ("week", "trace_id", "reviewer", "labelled_at", "answer_correct", "grounded", "citations_supported",
                 "refusal_appropriate", "expected_behaviour", "add_to_golden", "note", "relevant_chunk_ids",
                 "reference_answer")
_QUEUE_COLUMNS = ("week", "trace_id", "query_id", "category", "position", "seed", "selected_at")
_SELECTION_COLUMNS = ("week", "seed", "size", "stratified", "min_per_stratum", "population", "selected", "method",
                      "selected_by", "selected_at")
_SIGNED_OUT_COLUMNS = ("session_sha256", "username", "signed_out_at", "expires_at")
_IN_WEEK = "ts >= {start:DateTime64(3)} AND ts < {end:DateTime64(3)}"  # prunes partitions: traces are not keyed by id
_PRODUCTION_OF_WEEK = f"variant = 'production' AND {_IN_WEEK}"


class ClickHouseReviewQueries:
    """``ReviewStore`` over ClickHouse. Holds no state but the store; thread-safe as the store is."""

    def __init__(self, store: ReviewRows):
        self.store = store

    def _rows(self, sql: str, parameters: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        return self.store.query_rows(sql, parameters)

    def _t(self, name: str) -> str:
        return self.store.table(name)

    def population(self, week: str) -> dict[str, int]:
        rows = self._rows(f"SELECT category, uniqExact(trace_id) AS n FROM {self._t('traces')} FINAL "
                          f"WHERE {_PRODUCTION_OF_WEEK} GROUP BY category ORDER BY category", _bounds(week))
        return {str(r["category"]): int(r["n"]) for r in rows}

    def sample(self, week: str, seed: str, size: int, min_per_stratum: int = 0) -> list[SampledTrace]:
        m = min_per_stratum
        # stratified: rank within the stratum in hash order; the first m of each stratum sort before the rest
        rank = ", row_number() OVER (PARTITION BY category ORDER BY h, trace_id) AS r" if m else ""
        rows = self._rows(
            f"SELECT trace_id, query_id, category, cityHash64({{seed:String}}, trace_id) AS h{rank} "
            f"FROM {self._t('traces')} FINAL WHERE {_PRODUCTION_OF_WEEK} "
            f"ORDER BY {'(r > {m:UInt32}) ASC, ' if m else ''}h ASC, trace_id ASC LIMIT {{n:UInt32}}",
            {**_bounds(week), "seed": seed, "n": size, "m": m})
        return [SampledTrace(str(r["trace_id"]), str(r["query_id"]), str(r["category"]), i) for i, r in enumerate(rows)]

    def trace(self, week: str, trace_id: str) -> dict[str, Any] | None:
        rows = self._rows(f"SELECT {SELECT_TRACE_COLUMNS} FROM {self._t('traces')} FINAL "
                          f"WHERE {_IN_WEEK} AND trace_id = {{t:String}} LIMIT 1", {"t": trace_id, **_bounds(week)})
        return row_to_trace(rows[0]) if rows else None

    def verdicts(self, week: str, trace_id: str) -> list[Verdict]:
        rows = self._rows("SELECT metric, value, status, error, judge_name, judge_fingerprint, details "
                          f"FROM {self._t('scores')} FINAL WHERE {_IN_WEEK} AND trace_id = {{t:String}} "
                          "ORDER BY judge_fingerprint, metric", {"t": trace_id, **_bounds(week)})
        return [Verdict(str(r["metric"]), float(r["value"]), str(r["status"]), str(r["error"]), str(r["judge_name"]),
                        str(r["judge_fingerprint"]), parse_details(str(r["details"]))) for r in rows]

    def weeks(self) -> list[str]:
        rows = self._rows(f"SELECT week FROM {self._t('review_selections')} FINAL ORDER BY week DESC")
        return [str(r["week"]) for r in rows]

    def selection(self, week: str) -> SelectionRecord | None:
        rows = self._rows(f"SELECT {', '.join(_SELECTION_COLUMNS)} FROM {self._t('review_selections')} FINAL "
                          "WHERE week = {week:String}", {"week": week})
        if not rows:
            return None
        r = rows[0]
        return SelectionRecord(str(r["week"]), str(r["seed"]), int(r["size"]), bool(r["stratified"]),
                               int(r["min_per_stratum"]), int(r["population"]), int(r["selected"]), str(r["method"]),
                               str(r["selected_by"]), r["selected_at"])

    def queue(self, week: str) -> list[SampledTrace]:
        rows = self._rows(f"SELECT trace_id, query_id, category, position FROM {self._t('review_queue')} FINAL "
                          "WHERE week = {week:String} ORDER BY position", {"week": week})
        return [SampledTrace(str(r["trace_id"]), str(r["query_id"]), str(r["category"]), int(r["position"]))
                for r in rows]

    def in_queue(self, week: str, trace_id: str) -> bool:
        return bool(self._rows(f"SELECT 1 FROM {self._t('review_queue')} WHERE week = {{w:String}} "
                               "AND trace_id = {t:String} LIMIT 1", {"w": week, "t": trace_id}))

    def leftover_seed(self, week: str) -> str | None:
        rows = self._rows(f"SELECT any(seed) AS seed FROM {self._t('review_queue')} WHERE week = {{week:String}} "
                          "HAVING count() > 0", {"week": week})
        return str(rows[0]["seed"]) if rows else None

    def add_to_queue(self, week: str, items: Sequence[SampledTrace], seed: str, selected_at: datetime) -> None:
        self.store.insert_rows(
            "review_queue", [[week, t.trace_id, t.query_id, t.category, t.position, seed, selected_at] for t in items],
            _QUEUE_COLUMNS, dedup_token=f"review-queue-{week}-{seed}")

    def record_selection(self, record: SelectionRecord) -> None:
        r = record
        self.store.insert_rows("review_selections", [[
            r.week, r.seed, r.size, int(r.stratified), r.min_per_stratum, r.population, r.selected, r.method,
            r.selected_by, r.selected_at]], _SELECTION_COLUMNS)

    def save_label(self, label: Label) -> None:
        self.save_labels([label])

    def save_labels(self, labels: Sequence[Label]) -> None:
        """``save_label`` for many labels in one insert (the demo's simulated reviewers write hundreds)."""
        rows = [[label.week, label.trace_id, label.reviewer, label.labelled_at, _bit(label.answer_correct),
                 _bit(label.grounded), _bit(label.citations_supported), _bit(label.refusal_appropriate),
                 label.expected_behaviour, int(label.add_to_golden), label.note, list(label.relevant_chunk_ids),
                 label.reference_answer] for label in labels]
        if rows:
            self.store.insert_rows("review_labels", rows, _LABEL_COLUMNS)

    def labels_for(self, trace_id: str) -> list[Label]:
        rows = self._rows(f"SELECT {', '.join(_LABEL_COLUMNS)} FROM {self._t('review_labels')} FINAL "
                          "WHERE trace_id = {t:String} ORDER BY labelled_at, reviewer", {"t": trace_id})
        return [_label(r) for r in rows]

    def labels_of_week(self, week: str) -> dict[str, list[Label]]:
        rows = self._rows(
            f"SELECT {', '.join('l.' + c for c in _LABEL_COLUMNS)} FROM {self._t('review_labels')} AS l FINAL "
            f"WHERE l.week = {{week:String}} AND l.trace_id IN "
            f"(SELECT trace_id FROM {self._t('review_queue')} WHERE week = {{week:String}}) "
            "ORDER BY l.labelled_at, l.reviewer", {"week": week})
        out: dict[str, list[Label]] = {}
        for r in rows:
            label = _label({k.removeprefix("l."): v for k, v in r.items()})
            out.setdefault(label.trace_id, []).append(label)
        return out

    def golden_marked(self, week: str | None = None) -> list[tuple[str, str]]:
        where, parameters = (Where().require("add_to_golden", "=", "UInt8", 1)
                             .optional("week", "=", "String", week).clause())
        rows = self._rows(f"SELECT DISTINCT week, trace_id FROM {self._t('review_labels')} FINAL "
                          f"WHERE {where} ORDER BY week, trace_id", parameters)
        return [(str(r["week"]), str(r["trace_id"])) for r in rows]

    def sign_out(self, digest: str, username: str, signed_out_at: datetime, expires_at: datetime) -> None:
        self.store.insert_rows("review_signed_out", [[digest, username, signed_out_at, expires_at]],
                               _SIGNED_OUT_COLUMNS)

    def is_signed_out(self, digest: str) -> bool:
        return bool(self._rows(f"SELECT 1 AS found FROM {self._t('review_signed_out')} "
                               "WHERE session_sha256 = {d:String} LIMIT 1", {"d": digest}))


def review_store(store: ReviewStore | ReviewRows) -> ReviewStore:
    """``store`` when it already answers the review questions (a test double), else the ClickHouse queries over
    it: a process hands every role its one ``ClickHouseStore``."""
    return store if isinstance(store, ReviewStore) else ClickHouseReviewQueries(store)


def parse_details(text: str) -> Any:
    """A score's ``details`` column: JSON when it parses, else the text as it is, None when empty."""
    if not text:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return text


def _bounds(week: str) -> dict[str, Any]:
    start, end = parse_week(week)
    return {"start": start, "end": end}


def _bit(value: bool | None) -> int | None:
    return None if value is None else int(value)


def _bool(value: Any) -> bool | None:
    return None if value is None else bool(value)


def _label(row: dict[str, Any]) -> Label:
    return Label(
        week=str(row["week"]), trace_id=str(row["trace_id"]), reviewer=str(row["reviewer"]),
        labelled_at=row["labelled_at"], answer_correct=_bool(row["answer_correct"]), grounded=_bool(row["grounded"]),
        citations_supported=_bool(row["citations_supported"]),
        refusal_appropriate=_bool(row["refusal_appropriate"]), expected_behaviour=str(row["expected_behaviour"]),
        add_to_golden=bool(row["add_to_golden"]), note=str(row["note"]),
        relevant_chunk_ids=tuple(row["relevant_chunk_ids"]), reference_answer=str(row["reference_answer"]),
    )
