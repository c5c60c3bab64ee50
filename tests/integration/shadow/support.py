"""Helpers for the shadow tests: insert generated traffic and simulated judge scores into a chDB store."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import msgspec

from ragmon.contracts.decode import DecodedTrace, decode_trace
from ragmon.store import TraceColumns


def insert_traces(store: Any, docs: list[dict[str, Any]]) -> int:
    cols = TraceColumns()
    for doc in docs:
        decoded = decode_trace(msgspec.json.encode(doc))
        assert isinstance(decoded, DecodedTrace), decoded
        cols.add(decoded.trace)
    return store.insert_columns("traces", cols.columns)


def insert_scores(store: Any, rows: list[tuple[dict[str, Any], str, float, str]]) -> int:
    """rows of (trace document, metric, value, judge fingerprint), status ok."""
    names = ("trace_id", "query_id", "ts", "scored_at", "retriever_name", "retriever_version", "variant",
             "category", "metric", "value", "status", "error", "judge_name", "judge_fingerprint", "details")
    now = datetime.now(UTC)
    cols: dict[str, list[Any]] = {n: [] for n in names}
    for doc, metric, value, fp in rows:
        r = doc["retriever"]
        for name, v in zip(names, (
            doc["trace_id"], doc["query_id"], datetime.fromisoformat(doc["timestamp"]), now, r["name"],
            r["version"], r["variant"], doc["category"], metric, value, "ok", "", "sim-judge", fp, "",
        ), strict=True):
            cols[name].append(v)
    return store.insert_columns("scores", cols)
