"""``InMemoryReviewStore``: the review store seam answered from Python data, for tests and for trying the review
UI without a database.

It keeps what the ClickHouse tables keep and replaces rows by the same keys with the same "latest wins" rule
(ReplacingMergeTree read with FINAL), and it is held to the same contract suite as ``ClickHouseReviewQueries``
(``tests/contract/test_review_store.py``). Times are kept as the tables keep them: to the millisecond, and
read back in UTC without tzinfo, as ClickHouse's driver returns them. One documented difference: the sample's random
order comes from BLAKE2b, not ClickHouse's ``cityHash64``, so a seed picks a different (equally uniform) sample here.
``add_traces`` and ``add_score`` stand in for ingest and score, which write that traffic in production.
Must not: be used by a daemon (nothing here survives the process).
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Iterable, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from ragmon.contracts.decode import DecodedTrace, decode_trace
from ragmon.review.queries import parse_details
from ragmon.review.records import Label, SampledTrace, SelectionRecord, Verdict, parse_week
from ragmon.store.trace_rows import TraceColumns, row_to_trace


class InMemoryReviewStore:
    """A ``ReviewStore`` in memory. Thread-safe (one lock); every method returns at once and never raises
    ``StoreError``."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._traces: dict[tuple[Any, ...], dict[str, Any]] = {}  # traces' sort key → column values
        self._scores: dict[tuple[Any, ...], tuple[datetime, datetime, Verdict]] = {}  # key → (scored_at, ts, …)
        self._queue: dict[tuple[str, str], tuple[datetime, SampledTrace, str]] = {}  # (week, trace) → (at, …, seed)
        self._selections: dict[str, SelectionRecord] = {}
        self._labels: dict[tuple[str, str], Label] = {}  # (trace, reviewer) → latest label
        self._signed_out: set[str] = set()

    # -- what ingest and score would have written ------------------------------------------------------------
    def add_traces(self, documents: Iterable[dict[str, Any]]) -> None:
        """Store trace.v1 documents as ingest would (``ValueError`` for one the decoder rejects)."""
        for doc in documents:
            decoded = decode_trace(json.dumps(doc).encode())
            if not isinstance(decoded, DecodedTrace):
                raise ValueError(f"not a valid trace: {decoded.reason}: {decoded.detail}")
            batch = TraceColumns()
            batch.add(decoded.trace)
            row = {name: values[0] for name, values in batch.columns.items()}
            row["ts"] = _stored(row["ts"])
            key = (row["retriever_name"], row["variant"], row["category"], row["ts"].date(), row["trace_id"])
            with self._lock:
                self._traces[key] = row

    def add_score(self, trace: dict[str, Any], metric: str, value: float, *, status: str = "ok", error: str = "",
                  judge_name: str = "heuristic", fingerprint: str = "fp-heuristic-1", details: str = "",
                  scored_at: datetime | None = None) -> None:
        """Store a score of ``trace`` (a trace.v1 document) as the score role would."""
        ts = _stored(datetime.fromisoformat(trace["timestamp"]))
        key = (fingerprint, metric, trace["trace_id"], ts.date())
        verdict = Verdict(metric, float(value), status, error, judge_name, fingerprint, parse_details(details))
        with self._lock:
            self._scores[key] = _latest(self._scores.get(key), (_stored(scored_at or datetime.now(UTC)), ts, verdict))

    # -- ReviewStore -------------------------------------------------------------------------------------------
    def population(self, week: str) -> dict[str, int]:
        by: dict[str, set[str]] = {}
        for row in self._production(week):
            by.setdefault(row["category"], set()).add(row["trace_id"])
        return {category: len(ids) for category, ids in sorted(by.items())}

    def sample(self, week: str, seed: str, size: int, min_per_stratum: int = 0) -> list[SampledTrace]:
        rows = sorted(self._production(week), key=lambda r: (_hash(seed, r["trace_id"]), r["trace_id"]))
        rank: dict[str, int] = {}
        first: list[tuple[bool, int]] = []
        for row in rows:
            rank[row["category"]] = rank.get(row["category"], 0) + 1
            first.append((bool(min_per_stratum) and rank[row["category"]] > min_per_stratum, len(first)))
        chosen = [rows[i] for _, i in sorted(first)[:size]]
        return [SampledTrace(r["trace_id"], r["query_id"], r["category"], i) for i, r in enumerate(chosen)]

    def trace(self, week: str, trace_id: str) -> dict[str, Any] | None:
        start, end = _week(week)
        with self._lock:
            found = [r for r in self._traces.values() if r["trace_id"] == trace_id and start <= r["ts"] < end]
        return row_to_trace(found[0]) if found else None

    def verdicts(self, week: str, trace_id: str) -> list[Verdict]:
        start, end = _week(week)
        with self._lock:
            found = [v for key, (_, ts, v) in self._scores.items() if key[2] == trace_id and start <= ts < end]
        return sorted(found, key=lambda v: (v.judge_fingerprint, v.metric))

    def weeks(self) -> list[str]:
        with self._lock:
            return sorted(self._selections, reverse=True)

    def selection(self, week: str) -> SelectionRecord | None:
        with self._lock:
            return self._selections.get(week)

    def queue(self, week: str) -> list[SampledTrace]:
        with self._lock:
            items = [item for (w, _), (_, item, _) in self._queue.items() if w == week]
        return sorted(items, key=lambda item: item.position)

    def in_queue(self, week: str, trace_id: str) -> bool:
        with self._lock:
            return (week, trace_id) in self._queue

    def leftover_seed(self, week: str) -> str | None:
        with self._lock:
            return next((seed for (w, _), (_, _, seed) in self._queue.items() if w == week), None)

    def add_to_queue(self, week: str, items: Sequence[SampledTrace], seed: str, selected_at: datetime) -> None:
        with self._lock:
            for item in items:
                key = (week, item.trace_id)
                self._queue[key] = _latest(self._queue.get(key), (_stored(selected_at), item, seed))

    def record_selection(self, record: SelectionRecord) -> None:
        record = replace(record, selected_at=_stored(record.selected_at))
        with self._lock:
            old = self._selections.get(record.week)
            if old is None or record.selected_at >= old.selected_at:
                self._selections[record.week] = record

    def save_label(self, label: Label) -> None:
        label = replace(label, labelled_at=_stored(label.labelled_at))
        with self._lock:
            old = self._labels.get((label.trace_id, label.reviewer))
            if old is None or label.labelled_at >= old.labelled_at:
                self._labels[(label.trace_id, label.reviewer)] = label

    def labels_for(self, trace_id: str) -> list[Label]:
        with self._lock:
            return _in_order(lab for (t, _), lab in self._labels.items() if t == trace_id)

    def labels_of_week(self, week: str) -> dict[str, list[Label]]:
        with self._lock:
            queued = {t for (w, t) in self._queue if w == week}
            labels = _in_order(lab for lab in self._labels.values() if lab.week == week and lab.trace_id in queued)
        out: dict[str, list[Label]] = {}
        for label in labels:
            out.setdefault(label.trace_id, []).append(label)
        return out

    def golden_marked(self, week: str | None = None) -> list[tuple[str, str]]:
        with self._lock:
            return sorted({(lab.week, lab.trace_id) for lab in self._labels.values()
                           if lab.add_to_golden and (week is None or lab.week == week)})

    def sign_out(self, digest: str, username: str, signed_out_at: datetime, expires_at: datetime) -> None:
        with self._lock:
            self._signed_out.add(digest)

    def is_signed_out(self, digest: str) -> bool:
        with self._lock:
            return digest in self._signed_out

    def _production(self, week: str) -> list[dict[str, Any]]:
        start, end = _week(week)
        with self._lock:
            return [r for r in self._traces.values() if r["variant"] == "production" and start <= r["ts"] < end]


def _stored(moment: datetime) -> datetime:
    """``moment`` as a ``DateTime64(3, 'UTC')`` column gives it back: milliseconds, UTC, no tzinfo."""
    if moment.tzinfo is not None:
        moment = moment.astimezone(UTC).replace(tzinfo=None)
    return moment.replace(microsecond=moment.microsecond // 1000 * 1000)


def _week(week: str) -> tuple[datetime, datetime]:
    start, end = parse_week(week)
    return _stored(start), _stored(end)


def _hash(seed: str, trace_id: str) -> int:
    return int.from_bytes(hashlib.blake2b(f"{seed}\0{trace_id}".encode(), digest_size=8).digest(), "big")


def _latest(old: Any, new: Any) -> Any:
    """The row a ReplacingMergeTree keeps of two: the higher version (first element), the later insert on a tie."""
    return new if old is None or new[0] >= old[0] else old


def _in_order(labels: Iterable[Label]) -> list[Label]:
    return sorted(labels, key=lambda lab: (lab.labelled_at, lab.reviewer))
