"""The trace list: stored traces in a time window, filtered and paged, newest first or by a score, with the choices
the filter form offers (the retrievers, variants, strata and judge metrics seen in the window).

A list sorted or filtered by a judge metric lists the traces with a finite score of that metric in the window (the
latest score row per trace, whatever the judge fingerprint: the list's column names the metric, the trace page
every fingerprint); by one of the trace's own figures (``top1_score``, latency, cost, tokens) it lists them all.

Owns the list's records and their reading from rows; the SQL is ``queries.py`` (``trace_list_keys``,
``trace_list_rows``, ``filter_choices``). Long questions are cut in ClickHouse (``substringUTF8``) so a page never
carries megabytes of text. Must not render HTML or parse query strings (``filters`` does).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ragmon.console.filters import PAGE_SIZE, TraceFilter
from ragmon.console.queries import (
    QUESTION_CHARS,
    ConsoleReads,
    filter_choices,
    trace_list_keys,
    trace_list_rows,
)


@dataclass(frozen=True)
class TraceRow:
    trace_id: str
    query_id: str
    ts: datetime
    retriever: str
    variant: str
    stratum: str
    behaviour: str
    question: str
    question_cut: bool
    latency_ms: float
    cost_usd: float
    tokens: int
    top1_score: float | None
    n_results: int
    failed: bool
    score: float | None = None  # the value of the filter's metric, when it has one


@dataclass(frozen=True)
class TraceList:
    rows: list[TraceRow]
    total: int
    start: datetime
    end: datetime
    choices: dict[str, list[str]]

    @property
    def pages(self) -> int:
        return max(1, math.ceil(self.total / PAGE_SIZE))


def list_traces(store: ConsoleReads, f: TraceFilter, now: datetime) -> TraceList:
    """One page of the traces ``f`` selects (sorted by its metric when it asks), their total, and the filter's
    choices in the window."""
    start, end = f.window(now)
    keys, total = trace_list_keys(store, f, start, end)
    rows = trace_list_rows(store, keys)
    return TraceList([_row(r) for r in rows], total, start, end, filter_choices(store, start, end))


def _row(r: dict[str, Any]) -> TraceRow:
    top1, score = float(r["top1_score"]), float(r["score"])
    return TraceRow(str(r["trace_id"]), str(r["query_id"]), r["ts"], str(r["retriever_name"]), str(r["variant"]),
                    str(r["category"]), str(r["behaviour"]), str(r["question_start"]),
                    int(r["question_chars"]) > QUESTION_CHARS, float(r["latency_total_ms"]), float(r["cost_usd"]),
                    int(r["tokens"]), None if math.isnan(top1) else top1, int(r["n_results"]), bool(r["failed"]),
                    score if math.isfinite(score) else None)
