"""The coverage check's SQL: live traffic's question-type counts per stratum, under one classifier fingerprint.

Owns every SQL string of ``ragmon.coverage`` (values are ``{name:Type}`` parameters; only table names are
formatted in). Reads ``question_types`` with FINAL, so a re-scored trace counts once. Must not decide anything.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol

_TIME = "DateTime64(3, 'UTC')"


class CoverageStore(Protocol):
    """The part of the store the coverage check reads (``ClickHouseStore`` satisfies it). Blocking; raises
    ``StoreError``."""

    def table(self, name: str) -> str: ...
    def query_rows(self, sql: str, parameters: Mapping[str, Any] | None = None) -> list[dict[str, Any]]: ...


def latest_fingerprint(store: CoverageStore, since: datetime, until: datetime) -> str | None:
    """The classifier fingerprint of the newest classification in the window (None: nothing classified)."""
    rows = store.query_rows(
        f"SELECT classifier_fingerprint FROM {store.table('question_types')} "
        f"WHERE ts >= {{since:{_TIME}}} AND ts < {{until:{_TIME}}} AND status = 'ok' "
        "ORDER BY classified_at DESC LIMIT 1", {"since": since, "until": until})
    return rows[0]["classifier_fingerprint"] if rows else None


def type_counts(store: CoverageStore, fingerprint: str, since: datetime, until: datetime,
                variants: Sequence[str] = ("production",)) -> dict[str, dict[str, int]]:
    """stratum → question type → classified traces in [since, until) of these variants (FINAL: each once)."""
    rows = store.query_rows(
        f"SELECT category, question_type, count() AS n FROM {store.table('question_types')} FINAL "
        f"WHERE classifier_fingerprint = {{fp:String}} AND ts >= {{since:{_TIME}}} AND ts < {{until:{_TIME}}} "
        "AND status = 'ok' AND variant IN {variants:Array(String)} GROUP BY category, question_type",
        {"fp": fingerprint, "since": since, "until": until, "variants": list(variants)})
    out: dict[str, dict[str, int]] = {}
    for row in rows:
        out.setdefault(row["category"] or "", {})[row["question_type"]] = int(row["n"])
    return out


def types_of_traces(store: CoverageStore, trace_ids: Sequence[str]) -> dict[str, str]:
    """trace id → its newest stored question type (any fingerprint), for the traces that have one."""
    if not trace_ids:
        return {}
    rows = store.query_rows(
        f"SELECT trace_id, argMax(question_type, classified_at) AS question_type "
        f"FROM {store.table('question_types')} WHERE trace_id IN {{ids:Array(String)}} AND status = 'ok' "
        "GROUP BY trace_id", {"ids": list(trace_ids)})
    return {r["trace_id"]: r["question_type"] for r in rows}
