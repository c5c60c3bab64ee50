"""The trace list: stored traces in a time window, filtered and paged, newest first or by a score, with the choices
the filter form offers (the retrievers, variants, strata and judge metrics seen in the window).

A list sorted or filtered by a judge metric lists the traces with a finite score of that metric in the window (the
latest score row per trace, whatever the judge fingerprint: the list's column names the metric, the trace page
every fingerprint); by one of the trace's own figures (``top1_score``, latency, cost, tokens) it lists them all.

Owns the list's SQL. Every value travels as a ``{name:Type}`` parameter through ``Where``; only table names and
code-constant column lists are formatted in. Rows come back as plain records for the template; long questions are
cut in ClickHouse (``substringUTF8``) so a page never carries megabytes of text. Must not render HTML or parse
query strings (``filters`` does).

On a big store (bench/console.py, 10 M traces) a page reads in two steps: the page's keys (the table's sort key and
the score), then the columns of those 50 rows by key — sorting by a judge score joins every scored trace of the
window, and carrying the question text of each through the join and the sort cost more than the join. ``FINAL``
reads merge within each partition only (``FINAL_SETTINGS``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from ragmon.console.filters import PAGE_SIZE, TRACE_FIGURES, TraceFilter
from ragmon.where import Where

#: how much of a question the list shows (characters)
QUESTION_CHARS = 160
_LIST_COLUMNS = ("trace_id, query_id, ts, retriever_name, retriever_version, variant, category, behaviour, "
                 f"substringUTF8(question, 1, {QUESTION_CHARS}) AS question_start, lengthUTF8(question) AS "
                 "question_chars, "
                 "latency_total_ms, cost_usd, tokens_prompt + tokens_completion AS tokens, top1_score, n_results, "
                 "error != '' AS failed")
#: ``FINAL`` within each monthly partition only: a row's partition (``toYYYYMM(ts)``) follows from its sort key
#: (``toDate(ts)`` is in it), so two versions of a row never sit in different partitions and merging across them
#: changes nothing; ClickHouse cannot tell this by itself (its automatic decision looks for ``ts`` itself in the key)
#: and otherwise merges every part of the window together — five times slower on a settled 10 M-trace store
FINAL_SETTINGS = "SETTINGS do_not_merge_across_partitions_select_final = 1"
#: the (retriever, variant, stratum) combinations the filter form's choices are read from at once
_COMBINATIONS = 10_000
#: the traces table's sort key, which identifies a row under ``FINAL`` (migration 0001)
_KEY = "retriever_name, variant, category, toDate(ts) AS day, trace_id"
#: the trace's own figures as columns of the traces table (code constants: formatted into the SQL)
_FIGURES = {"top1_score": "top1_score", "latency_ms": "latency_total_ms", "cost_usd": "cost_usd",
            "tokens": "tokens_prompt + tokens_completion"}
assert set(_FIGURES) == set(TRACE_FIGURES)


class ConsoleReads(Protocol):
    """What the console reads through (``ClickHouseStore`` satisfies it)."""

    def table(self, name: str) -> str: ...
    def query_rows(self, sql: str, parameters: dict[str, Any] | None = None) -> list[dict[str, Any]]: ...


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
    where = _where(f, start, end)
    sql, params = where.clause()
    traces = store.table("traces")
    scored = _score_condition(store, f.score)
    if scored:
        sql = f"{sql} AND {scored}"
    source, score = f"{traces} FINAL", "nan"
    if f.metric in _FIGURES:
        score = _FIGURES[f.metric]
    elif f.metric:
        # the latest finite score of the metric per trace in the window: an inner join lists only scored traces
        source = (f"{traces} AS t FINAL INNER JOIN (SELECT trace_id, argMax(value, scored_at) AS metric_value "
                  f"FROM {store.table('scores')} WHERE metric = {{metric:String}} AND ts >= {{start:DateTime64(3)}} "
                  "AND ts < {end:DateTime64(3)} AND isFinite(value) GROUP BY trace_id) AS s USING (trace_id)")
        score, params = "metric_value", {**params, "metric": f.metric}
    low, high = f.bounds()
    if low is not None:
        sql, params = f"{sql} AND {score} >= {{score_min:Float64}}", {**params, "score_min": low}
    if high is not None:
        sql, params = f"{sql} AND {score} <= {{score_max:Float64}}", {**params, "score_max": high}
    order = f"score {'DESC' if f.order == 'desc' else 'ASC'}, ts DESC, trace_id" if f.order else "ts DESC, trace_id"
    # the page's keys with the total beside them (a window function: one pass over the window, not a second
    # one to count); a page past the end has no row to carry it, so it is counted apart
    keys = store.query_rows(
        f"SELECT {_KEY}, toFloat64({score}) AS score, count() OVER () AS total FROM {source} WHERE {sql} "
        f"ORDER BY {order} LIMIT {{limit:UInt32}} OFFSET {{offset:UInt64}} {FINAL_SETTINGS}",
        {**params, "limit": PAGE_SIZE, "offset": (f.page - 1) * PAGE_SIZE})
    total = int(keys[0]["total"]) if keys else int(store.query_rows(
        f"SELECT count() AS n FROM {source} WHERE {sql} {FINAL_SETTINGS}", params)[0]["n"])
    rows = _by_key(store, keys)
    return TraceList([_row(r) for r in rows], total, start, end, choices(store, start, end))


def _by_key(store: ConsoleReads, keys: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The list's columns of the rows ``keys`` name (sort key and score), in the keys' order."""
    if not keys:
        return []
    ids = [(str(k["retriever_name"]), str(k["variant"]), str(k["category"]), k["day"], str(k["trace_id"]))
           for k in keys]
    found = {(str(r["retriever_name"]), str(r["variant"]), str(r["category"]), r["day"], str(r["trace_id"])): r
             for r in store.query_rows(
                 f"SELECT {_LIST_COLUMNS}, toDate(ts) AS day FROM {store.table('traces')} FINAL "
                 "WHERE (retriever_name, variant, category, toDate(ts), trace_id) IN "
                 f"{{keys:Array(Tuple(String, String, String, Date, String))}} {FINAL_SETTINGS}", {"keys": ids})}
    # a row deleted between the two reads (the retention TTL) is left out
    return [{**found[key], "score": k["score"]} for key, k in zip(ids, keys, strict=True) if key in found]


def choices(store: ConsoleReads, start: datetime, end: datetime) -> dict[str, list[str]]:
    """The distinct retrievers, variants, strata and judge metrics of the window (at most 200 each), and the
    trace's own figures, for the filter form."""
    sql, params = _where(TraceFilter(), start, end).clause()
    out: dict[str, list[str]] = {}
    # the sort key's first columns, the three at once (one read of the window); per column when they combine in
    # more ways than that read returns
    rows = store.query_rows(f"SELECT DISTINCT retriever_name, variant, category FROM {store.table('traces')} "
                            f"WHERE {sql} LIMIT {_COMBINATIONS + 1}", params)
    for column, key in (("retriever_name", "retriever"), ("variant", "variant"), ("category", "stratum")):
        if len(rows) <= _COMBINATIONS:
            out[key] = sorted({str(r[column]) for r in rows})[:200]
            continue
        values = store.query_rows(f"SELECT DISTINCT {column} AS v FROM {store.table('traces')} WHERE {sql} "
                                  "ORDER BY v LIMIT 200", params)
        out[key] = [str(r["v"]) for r in values]
    rows = store.query_rows(f"SELECT DISTINCT metric AS v FROM {store.table('scores')} WHERE {sql} "
                            "ORDER BY v LIMIT 200", params)
    out["metric"] = [*TRACE_FIGURES, *(str(r["v"]) for r in rows if str(r["v"]) not in TRACE_FIGURES)]
    return out


def _where(f: TraceFilter, start: datetime, end: datetime) -> Where:
    def opt(value: str) -> str | None:
        return value or None

    # an alert's retriever label is name@version (ragmon_permission_leaks_total): both parts filter
    name, _, version = f.retriever.rpartition("@") if "@" in f.retriever else (f.retriever, "", "")
    return (Where().require("ts", ">=", "DateTime64(3)", start, name="start")
            .require("ts", "<", "DateTime64(3)", end, name="end")
            .optional("retriever_name", "=", "String", opt(name))
            .optional("retriever_version", "=", "String", opt(version))
            .optional("variant", "=", "String", opt(f.variant))
            .optional("category", "=", "String", opt(f.stratum))
            .optional("behaviour", "=", "String", opt(f.behaviour))
            .optional("query_id", "=", "String", opt(f.query_id)))


def _score_condition(store: ConsoleReads, status: str) -> str:
    """A condition on the traces' score rows in the same window (``{start}``/``{end}`` are the list's)."""
    if not status:
        return ""
    window = "ts >= {start:DateTime64(3)} AND ts < {end:DateTime64(3)}"
    scores = store.table("scores")
    if status == "failed":
        return f"trace_id IN (SELECT trace_id FROM {scores} FINAL WHERE {window} AND status = 'failed')"
    negate = "NOT " if status == "unscored" else ""
    return f"trace_id {negate}IN (SELECT trace_id FROM {scores} WHERE {window})"


def _row(r: dict[str, Any]) -> TraceRow:
    top1, score = float(r["top1_score"]), float(r["score"])
    return TraceRow(str(r["trace_id"]), str(r["query_id"]), r["ts"], str(r["retriever_name"]), str(r["variant"]),
                    str(r["category"]), str(r["behaviour"]), str(r["question_start"]),
                    int(r["question_chars"]) > QUESTION_CHARS, float(r["latency_total_ms"]), float(r["cost_usd"]),
                    int(r["tokens"]), None if math.isnan(top1) else top1, int(r["n_results"]), bool(r["failed"]),
                    score if math.isfinite(score) else None)
