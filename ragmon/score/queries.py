"""The score role's SQL, and the seam it runs over: ``ScoreStore``.

Why this level: the scorer, the backfill source, calibration and the report ask a handful of questions of the
store (the fingerprint this judge kind wrote last, a page of stored traces, the human labels of a window, the
judge's stored verdicts on them, the report's grouped means) and write score rows. ``ScoreStore`` is the part
of the one store they need (``table``, ``query_rows``, ``command``, ``insert_columns``; ``ClickHouseStore``
satisfies it), and the functions below are those questions, so the rest of the role reads as what it does and
a reader finds every SQL string of the role here. As with the shadow role there is no in-memory double: the
grouping sets of the report and the FINAL reads *are* this SQL, so the tests run it on chDB
(``tests/integration/test_score_*.py``, ``tests/integration/test_where_chdb.py``).

Owns every SQL string of the score role. Every value is a ``{name:Type}`` parameter; the only text formatted in
is table names (``store.table``) and code-constant column lists. Must not judge, sample or decide anything.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol

from ragmon.store.trace_rows import SELECT_TRACE_COLUMNS
from ragmon.where import Where

_TIME = "DateTime64(3, 'UTC')"


class ScoreStore(Protocol):
    """What the score role needs from a store (``ClickHouseStore`` satisfies it). Blocking; raises
    ``StoreError`` (``RetryableStoreError`` for an outage); thread-safe. ``insert_columns`` with the same
    ``dedup_token`` twice stores the rows once."""

    def table(self, name: str) -> str: ...
    def query_rows(self, sql: str, parameters: Mapping[str, Any] | None = None) -> list[dict[str, Any]]: ...
    def command(self, sql: str, parameters: Mapping[str, Any] | None = None) -> Any: ...
    def insert_columns(self, table: str, columns: Mapping[str, Sequence[Any]], *,
                       dedup_token: str | None = None) -> int: ...


def last_fingerprint(store: ScoreStore, judge_name: str) -> str | None:
    """The fingerprint the newest score of this judge kind carries (last 30 days, partition-pruned)."""
    rows = store.query_rows(
        f"SELECT judge_fingerprint FROM {store.table('scores')} WHERE judge_name = {{name:String}} "
        "AND ts >= now() - INTERVAL 30 DAY ORDER BY scored_at DESC LIMIT 1", {"name": judge_name})
    return rows[0]["judge_fingerprint"] if rows else None


def _failed_filter(store: ScoreStore, failed_of: str | None) -> str:
    """With a judge fingerprint: only traces whose stored scores of that fingerprint are failed (a judge outage's)."""
    if failed_of is None:
        return ""
    return (f"AND trace_id IN (SELECT trace_id FROM {store.table('scores')} FINAL "
            f"WHERE judge_fingerprint = {{fingerprint:String}} AND ts >= {{since:{_TIME}}} AND ts < {{until:{_TIME}}} "
            "AND status = 'failed') ")


def count_traces(store: ScoreStore, since: datetime, until: datetime, *, failed_of: str | None = None) -> int:
    """Stored traces with ``since <= ts < until`` (FINAL: each once); with ``failed_of`` (a judge fingerprint) only
    those whose scores of that judge are stored as failed."""
    return int(store.command(
        f"SELECT count() FROM {store.table('traces')} FINAL WHERE ts >= {{since:{_TIME}}} AND ts < {{until:{_TIME}}} "
        + _failed_filter(store, failed_of),
        {"since": since, "until": until, **({"fingerprint": failed_of} if failed_of else {})}))


def traces_after(store: ScoreStore, since: datetime, until: datetime, after: tuple[datetime, str],
                 limit: int, *, failed_of: str | None = None) -> list[dict[str, Any]]:
    """The next ``limit`` stored trace rows in [since, until) after the key ``(ts, trace_id)``, oldest first (with
    ``failed_of``, as ``count_traces``)."""
    return store.query_rows(
        f"SELECT {SELECT_TRACE_COLUMNS} FROM {store.table('traces')} FINAL "
        f"WHERE ts >= {{since:{_TIME}}} AND ts < {{until:{_TIME}}} "
        + _failed_filter(store, failed_of)
        + f"AND (ts, trace_id) > ({{last_ts:{_TIME}}}, {{last_id:String}}) ORDER BY ts, trace_id LIMIT {{limit:UInt32}}",
        {"since": since, "until": until, "last_ts": after[0], "last_id": after[1], "limit": limit,
         **({"fingerprint": failed_of} if failed_of else {})})


def traces_by_id(store: ScoreStore, trace_ids: Sequence[str]) -> list[dict[str, Any]]:
    """Stored trace rows with these ids (FINAL)."""
    return store.query_rows(
        f"SELECT {SELECT_TRACE_COLUMNS} FROM {store.table('traces')} FINAL WHERE trace_id IN {{ids:Array(String)}}",
        {"ids": sorted(set(trace_ids))})


def review_labels(store: ScoreStore, since: datetime | None, until: datetime | None) -> list[dict[str, Any]]:
    """Human labels labelled in [since, until) (either bound optional), one row per (trace, reviewer)."""
    where, params = (Where().optional("labelled_at", ">=", _TIME, since, name="since")
                     .optional("labelled_at", "<", _TIME, until, name="until").clause())
    return store.query_rows(
        "SELECT trace_id, reviewer, answer_correct, grounded, citations_supported, refusal_appropriate "
        f"FROM {store.table('review_labels')} FINAL WHERE {where}", params)


def ok_scores(store: ScoreStore, trace_ids: Sequence[str], metrics: Sequence[str],
              fingerprint: str | None = None) -> list[dict[str, Any]]:
    """Stored ``status = 'ok'`` scores of these traces and metrics (of one fingerprint, when given)."""
    where, params = (Where().require("trace_id", "IN", "Array(String)", sorted(set(trace_ids)), name="ids")
                     .require("metric", "IN", "Array(String)", sorted(set(metrics)), name="metrics")
                     .optional("judge_fingerprint", "=", "String", fingerprint or None, name="fp").clause())
    return store.query_rows(
        f"SELECT trace_id, category, metric, value, judge_fingerprint, judge_name FROM {store.table('scores')} FINAL "
        f"WHERE status = 'ok' AND {where}", params)


def report_rows(store: ScoreStore, since: datetime, until: datetime, *, retriever: str | None = None,
                variant: str | None = None) -> list[dict[str, Any]]:
    """Counts by status and the mean of ok values per (fingerprint, retriever@version, variant, metric,
    stratum), plus each group's all-strata row (``whole = 1``) first."""
    where, params = (Where().require("ts", ">=", _TIME, since, name="since")
                     .require("ts", "<", _TIME, until, name="until")
                     .optional("retriever_name", "=", "String", retriever, name="retriever")
                     .optional("variant", "=", "String", variant).clause())
    return store.query_rows(
        "SELECT judge_fingerprint, any(judge_name) AS judge_name, "
        "concat(retriever_name, '@', retriever_version) AS retriever, variant, metric, "
        "category, grouping(category) AS whole, "
        "countIf(status = 'ok') AS n_ok, countIf(status = 'not_applicable') AS n_na, "
        "countIf(status = 'failed') AS n_failed, avgIf(value, status = 'ok') AS mean "
        f"FROM {store.table('scores')} FINAL WHERE {where} "
        "GROUP BY GROUPING SETS ((judge_fingerprint, retriever, variant, metric, category), "
        "(judge_fingerprint, retriever, variant, metric)) "
        "ORDER BY judge_fingerprint, retriever, variant, metric, whole DESC, category",
        params)
