"""The console's SQL, and the seam it reads through: ``ConsoleReads``.

Why this level: the console's pages (``traces``, ``trace_page``, ``drift_page``, ``incident_page``,
``shadow_page``) ask the store a few questions each — a page of the trace list and the filter form's choices, one
trace with its scores, twins and review weeks, the latest drift check and each group's history, one segment's
traces, the retrievers seen lately — and get rows back. The functions below are those questions, so the pages read
as what they show and a reader finds every console SQL string here. No in-memory double: the two-step reads and
the FINAL settings *are* the point (tuned on a 10 M-trace store, ``bench/console.py``), so the tests run this SQL
on chDB (``tests/integration/console/``).

On a big store a trace-list page reads in two steps: the page's keys (the table's sort key and the score), then
the columns of those 50 rows by key — sorting by a judge score joins every scored trace of the window, and carrying
the question text of each through the join and the sort cost more than the join. ``FINAL`` reads merge within
each partition only (``FINAL_SETTINGS``).

Owns every SQL string of the console. Every value is a ``{name:Type}`` parameter (through ``Where`` where filters
are optional); the only text formatted in is table names (``store.table``), code-constant column lists and
expressions, and integers from code. Must not write anything, render HTML or parse query strings.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Protocol

from ragmon.console.filters import PAGE_SIZE, TRACE_FIGURES, TraceFilter
from ragmon.drift.check.queries import COLUMNS
from ragmon.drift.check.window_queries import Group
from ragmon.drift.explain.explain_queries import DIMENSIONS
from ragmon.store.trace_rows import SELECT_TRACE_COLUMNS
from ragmon.where import Where


class ConsoleReads(Protocol):
    """What the console reads through (``ClickHouseStore`` satisfies it). Read-only; blocking; raises
    ``StoreError`` (``retryable`` for an outage); thread-safe (the pages call it from worker threads)."""

    def table(self, name: str) -> str: ...
    def query_rows(self, sql: str, parameters: dict[str, Any] | None = None) -> list[dict[str, Any]]: ...


#: ``FINAL`` within each monthly partition only: a row's partition (``toYYYYMM(ts)``) follows from its sort key
#: (``toDate(ts)`` is in it), so two versions of a row never sit in different partitions and merging across them
#: changes nothing; ClickHouse cannot tell this by itself (its automatic decision looks for ``ts`` itself in the key)
#: and otherwise merges every part of the window together — five times slower on a settled 10 M-trace store
FINAL_SETTINGS = "SETTINGS do_not_merge_across_partitions_select_final = 1"

# -- the trace list (traces.py) -----------------------------------------------------------------------------------

#: how much of a question the list shows (characters)
QUESTION_CHARS = 160
_LIST_COLUMNS = ("trace_id, query_id, ts, retriever_name, retriever_version, variant, category, behaviour, "
                 f"substringUTF8(question, 1, {QUESTION_CHARS}) AS question_start, lengthUTF8(question) AS "
                 "question_chars, "
                 "latency_total_ms, cost_usd, tokens_prompt + tokens_completion AS tokens, top1_score, n_results, "
                 "error != '' AS failed")
#: the (retriever, variant, stratum) combinations the filter form's choices are read from at once
_COMBINATIONS = 10_000
#: the traces table's sort key, which identifies a row under ``FINAL`` (migration 0001)
_KEY = "retriever_name, variant, category, toDate(ts) AS day, trace_id"
#: the trace's own figures as columns of the traces table (code constants: formatted into the SQL)
_FIGURES = {"top1_score": "top1_score", "latency_ms": "latency_total_ms", "cost_usd": "cost_usd",
            "tokens": "tokens_prompt + tokens_completion"}
assert set(_FIGURES) == set(TRACE_FIGURES)


def trace_list_keys(store: ConsoleReads, f: TraceFilter, start: datetime,
                    end: datetime) -> tuple[list[dict[str, Any]], int]:  # fmt: skip
    """The sort keys and scores of the page of traces ``f`` selects in [start, end), and how many it selects."""
    sql, params = _where(f, start, end).clause()
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
    return keys, total


def trace_list_rows(store: ConsoleReads, keys: list[dict[str, Any]]) -> list[dict[str, Any]]:
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


def filter_choices(store: ConsoleReads, start: datetime, end: datetime) -> dict[str, list[str]]:
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


# -- one trace (trace_page.py) ------------------------------------------------------------------------------------

def trace_row(store: ConsoleReads, trace_id: str, start: datetime | None,
              end: datetime | None) -> dict[str, Any] | None:  # fmt: skip
    """The stored trace's row (``SELECT_TRACE_COLUMNS``) with ``start <= ts <= end`` when given, or None."""
    where = Where().require("trace_id", "=", "String", trace_id)
    if start is not None and end is not None:
        where.require("ts", ">=", "DateTime64(3)", start, name="start").require(
            "ts", "<=", "DateTime64(3)", end, name="end")
    sql, params = where.clause()
    rows = store.query_rows(
        f"SELECT {SELECT_TRACE_COLUMNS} FROM {store.table('traces')} FINAL WHERE {sql} LIMIT 1 {FINAL_SETTINGS}",
        params)
    return rows[0] if rows else None


def trace_score_rows(store: ConsoleReads, trace_id: str, start: datetime, end: datetime,
                     limit: int) -> list[dict[str, Any]]:  # fmt: skip
    """The trace's score rows with ``start <= ts <= end`` (a score row's ``ts`` is its trace's), FINAL, by
    fingerprint then metric."""
    return store.query_rows(
        "SELECT metric, value, status, error, judge_name, judge_fingerprint, details "
        f"FROM {store.table('scores')} FINAL WHERE trace_id = {{t:String}} AND ts >= {{start:DateTime64(3)}} "
        f"AND ts <= {{end:DateTime64(3)}} ORDER BY judge_fingerprint, metric LIMIT {int(limit)} {FINAL_SETTINGS}",
        {"t": trace_id, "start": start, "end": end})


def twin_rows(store: ConsoleReads, query_id: str, trace_id: str, start: datetime, end: datetime,
              limit: int) -> list[dict[str, Any]]:  # fmt: skip
    """The other traces of the query with ``start <= ts <= end``, by variant then time."""
    return store.query_rows(
        "SELECT trace_id, ts, retriever_name, retriever_version, variant "
        f"FROM {store.table('traces')} FINAL WHERE query_id = {{q:String}} AND trace_id != {{t:String}} "
        "AND ts >= {start:DateTime64(3)} AND ts <= {end:DateTime64(3)} ORDER BY variant, ts "
        f"LIMIT {int(limit)} {FINAL_SETTINGS}",
        {"q": query_id, "t": trace_id, "start": start, "end": end})


def review_weeks_of(store: ConsoleReads, trace_id: str, limit: int) -> list[str]:
    """The weeks whose review queue holds the trace, oldest first."""
    rows = store.query_rows(f"SELECT DISTINCT week FROM {store.table('review_queue')} FINAL "
                            f"WHERE trace_id = {{t:String}} ORDER BY week LIMIT {int(limit)}", {"t": trace_id})
    return [str(r["week"]) for r in rows]


# -- stored drift checks (drift_page.py, incident_page.py) --------------------------------------------------------

_WINDOW_COLUMNS = "current_start, current_end, reference_start, reference_end"


def _check_where(group: dict[str, str]) -> Where:
    return (Where().optional("variant", "=", "String", group["variant"] or None)
            .optional("category", "=", "String", group["stratum"] or None, name="stratum")
            .optional("feature", "=", "String", group["feature"] or None))


def _check_clause(group: dict[str, str], where: Where) -> tuple[str, dict[str, Any]]:
    """``where`` plus the retriever, which an alert names as ``name@version`` (its label) and a person by name."""
    sql, params = where.clause()
    if group["retriever"]:
        sql += (" AND (retriever_name = {retriever:String} OR "
                "concat(retriever_name, '@', retriever_version) = {retriever:String})")
        params["retriever"] = group["retriever"]
    return sql, params


def latest_check(store: ConsoleReads) -> dict[str, Any] | None:
    """The newest stored drift check's ``check_id`` and ``checked_at``, or None."""
    rows = store.query_rows(f"SELECT check_id, checked_at FROM {store.table('drift_checks')} "
                            "ORDER BY checked_at DESC LIMIT 1")
    return rows[0] if rows else None


def check_rows(store: ConsoleReads, group: dict[str, str], check_id: str) -> list[dict[str, Any]]:
    """The check's rows (the drift report's ``COLUMNS`` and both windows) of the group asked for (empty: any)."""
    sql, params = _check_clause(group, _check_where(group).require("check_id", "=", "String", check_id))
    return store.query_rows(f"SELECT {', '.join(COLUMNS)}, {_WINDOW_COLUMNS} FROM {store.table('drift_checks')} "
                            f"WHERE {sql}", params)


def check_history_rows(store: ConsoleReads, group: dict[str, str], since: datetime,
                       checks: int) -> list[dict[str, Any]]:  # fmt: skip
    """Per group and feature checked since ``since``: the newest ``checks`` (checked_at, statistic, cusum,
    cusum_threshold, flagged) of its primary test (the one with a CUSUM, else the first), at most 500 groups."""
    sql, params = _check_clause(group, _check_where(group).require("checked_at", ">=", "DateTime64(3)", since,
                                                                   name="since"))
    return store.query_rows(
        "SELECT retriever_name, retriever_version, variant, category, feature, "
        "arraySlice(arrayReverseSort(c -> c.1, groupArray((checked_at, statistic, cusum, cusum_threshold, "
        f"drifted OR persistent))), 1, {int(checks)}) AS checks "
        f"FROM (SELECT * FROM {store.table('drift_checks')} WHERE {sql} "
        "ORDER BY checked_at DESC, isFinite(cusum_threshold) DESC, test LIMIT 1 BY "
        "check_id, retriever_name, retriever_version, variant, category, feature) "
        "GROUP BY retriever_name, retriever_version, variant, category, feature "
        "ORDER BY retriever_name, retriever_version, variant, category, feature LIMIT 500", params)


def group_check_rows(store: ConsoleReads, group: Group, feature: str, limit: int) -> list[dict[str, Any]]:
    """The newest ``limit`` stored checks of one group and feature, newest first: per check its largest CUSUM
    (``c_max``) and threshold (``h_max``), whether it drifted or paged, and the test of the largest CUSUM."""
    return store.query_rows(
        f"SELECT checked_at, check_id, max(cusum) AS c_max, max(cusum_threshold) AS h_max, "
        f"max(persistent) AS persistent, max(drifted) AS drifted, argMax(test, cusum) AS test, "
        f"argMax(statistic, cusum) AS statistic, argMax(p_adjusted, cusum) AS p_adjusted, "
        f"argMax(threshold, cusum) AS threshold, argMax(status, cusum) AS status, max(n_reference) AS n_reference, "
        f"max(n_current) AS n_current FROM {store.table('drift_checks')} WHERE retriever_name = {{rn:String}} "
        f"AND retriever_version = {{rv:String}} AND variant = {{var:String}} AND category = {{cat:String}} "
        f"AND feature = {{f:String}} GROUP BY checked_at, check_id ORDER BY checked_at DESC LIMIT {int(limit)}",
        {"rn": group.retriever_name, "rv": group.retriever_version, "var": group.variant, "cat": group.stratum,
         "f": feature})


def versions_served_sql(store: ConsoleReads, group: Group, since: str) -> str:
    """SQL a person pastes into clickhouse-client (not run here): the corpus and index versions the group served
    since ``since`` (``YYYY-MM-DD hh:mm:ss``). Values are quoted as literals, as a pasted query needs them."""
    def literal(v: str) -> str:
        return "'" + v.replace("\\", "\\\\").replace("'", "\\'") + "'"

    return (f"SELECT corpus_snapshot, index_version, count() FROM {store.table('traces')} WHERE "
            f"retriever_name = {literal(group.retriever_name)} AND retriever_version = "
            f"{literal(group.retriever_version)} AND variant = {literal(group.variant)} AND category = "
            f"{literal(group.stratum)} AND ts > {literal(since)} "
            f"GROUP BY ALL")


def segment_trace_rows(store: ConsoleReads, dimension: str, feature_expr: str, current: str, reference: str,
                       params: dict[str, Any], limit: int) -> list[dict[str, Any]]:  # fmt: skip
    """The current window's traces of the group whose ``dimension`` is the segment ``{seg}`` (in ``params``, with
    the group's and the windows' parameters), lowest feature value first: trace_id, ts, question start, value.
    ``current``/``reference`` are the drift windows' conditions (``drift.explain_queries.window_condition``)."""
    dims = {d.name: d for d in DIMENSIONS}
    traces, types = store.table("traces"), store.table("question_types")
    group_sql = ("retriever_name = {rn:String} AND retriever_version = {rv:String} AND variant = {var:String} "
                 "AND category = {cat:String}")
    source = dims["source"].expr
    if dimension == "question_type":
        member = (f"trace_id IN (SELECT trace_id FROM {types} WHERE status = 'ok' "
                  f"AND toString(question_type) = {{seg:String}})")
    elif dimension == "source_before":
        member = (f"question_hash IN (SELECT qh FROM (SELECT question_hash AS qh, topK(1)({source})[1] AS s "
                  f"FROM {traces} WHERE {group_sql} AND ({reference}) GROUP BY qh) WHERE s = {{seg:String}})")
    else:
        member = f"toString({dims[dimension].expr}) = {{seg:String}}"
    return store.query_rows(
        f"SELECT trace_id, ts, substringUTF8(question, 1, 200) AS question, toFloat64({feature_expr}) AS value "
        f"FROM {traces} WHERE {group_sql} AND ({current}) AND {member} ORDER BY isFinite(value) DESC, value ASC, "
        f"trace_id LIMIT {int(limit)}", params)


# -- the shadow page (shadow_page.py) -----------------------------------------------------------------------------

def retrievers_served(store: ConsoleReads, since: datetime, until: datetime) -> list[dict[str, Any]]:
    """(name, version, variant, n) of the production and shadow retrievers with traces in [since, until), busiest
    first (at most 200); times naive UTC."""
    return store.query_rows(
        "SELECT retriever_name AS name, retriever_version AS version, variant, count() AS n "
        f"FROM {store.table('traces')} WHERE ts >= {{since:DateTime64(3)}} AND ts < {{until:DateTime64(3)}} "
        "AND variant IN ('production', 'shadow') GROUP BY name, version, variant ORDER BY n DESC, name, version "
        "LIMIT 200", {"since": since, "until": until})
