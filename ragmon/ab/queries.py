"""The A/B comparison's SQL: the two arms' traces, their outcome events, their judged quality, the sessions.

Owns every SQL string of ``ragmon.ab`` (values as ``{name:Type}`` parameters; only table names formatted in).
Reads with FINAL, so a re-sent trace or event counts once. Must not compute statistics or decide.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol

_TIME = "DateTime64(3, 'UTC')"


class AbStore(Protocol):
    """What the comparison reads (``ClickHouseStore`` satisfies it). Blocking; raises ``StoreError``."""

    def table(self, name: str) -> str: ...
    def query_rows(self, sql: str, parameters: Mapping[str, Any] | None = None) -> list[dict[str, Any]]: ...


def arm_traces(store: AbStore, name: str, version: str | None, variant: str, since: datetime,
               until: datetime) -> list[dict[str, Any]]:
    """trace_id, query_id, category, session_id, ts, latency_total_ms of one arm's traces in [since, until)."""
    version_clause = "AND retriever_version = {version:String} " if version else ""
    return store.query_rows(
        f"SELECT trace_id, query_id, category, session_id, ts, latency_total_ms FROM {store.table('traces')} FINAL "
        f"WHERE ts >= {{since:{_TIME}}} AND ts < {{until:{_TIME}}} AND retriever_name = {{name:String}} "
        f"AND variant = {{variant:String}} {version_clause}ORDER BY ts",
        {"since": since, "until": until, "name": name, "version": version or "", "variant": variant})


def outcomes_of(store: AbStore, query_ids: Sequence[str], since: datetime, until: datetime) -> list[dict[str, Any]]:
    """Outcome events (query_id, kind, time, value) of these queries that happened in [since, until)."""
    if not query_ids:
        return []
    return store.query_rows(
        f"SELECT query_id, kind, time, value FROM {store.table('outcomes')} FINAL "
        f"WHERE query_id IN {{ids:Array(String)}} AND time >= {{since:{_TIME}}} AND time < {{until:{_TIME}}}",
        {"ids": list(query_ids), "since": since, "until": until})


def session_asks(store: AbStore, sessions: Sequence[str], since: datetime, until: datetime) -> list[dict[str, Any]]:
    """Every non-shadow query (session_id, query_id, ts) of these sessions in [since, until), for reformulation."""
    if not sessions:
        return []
    return store.query_rows(
        f"SELECT session_id, query_id, ts FROM {store.table('traces')} FINAL WHERE session_id IN "
        f"{{s:Array(String)}} AND variant != 'shadow' AND ts >= {{since:{_TIME}}} AND ts < {{until:{_TIME}}} "
        "ORDER BY session_id, ts", {"s": list(sessions), "since": since, "until": until})


def quality_of(store: AbStore, trace_ids: Sequence[str], metrics: Sequence[str]) -> tuple[str | None, list[dict]]:
    """(newest judge fingerprint among these traces' scores, their ok values of ``metrics`` under it)."""
    if not trace_ids:
        return None, []
    rows = store.query_rows(
        f"SELECT judge_fingerprint FROM {store.table('scores')} WHERE trace_id IN {{ids:Array(String)}} "
        "AND status = 'ok' ORDER BY scored_at DESC LIMIT 1", {"ids": list(trace_ids)})
    if not rows:
        return None, []
    fp = rows[0]["judge_fingerprint"]
    return fp, store.query_rows(
        f"SELECT trace_id, metric, value FROM {store.table('scores')} FINAL WHERE trace_id IN {{ids:Array(String)}} "
        "AND judge_fingerprint = {fp:String} AND metric IN {m:Array(String)} AND status = 'ok'",
        {"ids": list(trace_ids), "fp": fp, "m": list(metrics)})
