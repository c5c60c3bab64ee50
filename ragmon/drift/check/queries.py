"""The SQL of stored drift checks (``drift_checks``), and the seam every part of drift reads and writes through:
``DriftStore``.

Owns every statement over ``drift_checks``: writing a check's rows, reading one check back (``drift report``, the
console), the latest check's recorded settings (``applied``), when each group's features were last assessed (the
``RagmonDriftBlind`` gauge) and the stored check ``drift explain`` explains. The windows' summaries over traces and
scores are ``window_queries``'s; ``drift explain``'s own pass over a group's traces is
``ragmon.drift.explain.explain_queries``'s. Every value is a ``{name:Type}`` parameter; only table names and the
column lists below (code constants) are formatted in. Must not decide, render or convert anything beyond the rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, Protocol


class DriftStore(Protocol):
    """What drift's check, report, explain and corpus feed need from a store (``ClickHouseStore`` satisfies it).
    Every call blocks until ClickHouse answers and raises ``StoreError`` (retryable or permanent) on failure;
    ``insert_columns`` with the same ``dedup_token`` is idempotent."""

    def table(self, name: str) -> str: ...
    def query_rows(self, sql: str, parameters: dict[str, Any] | None = None) -> list[dict[str, Any]]: ...
    def insert_rows(self, table: str, rows: Sequence[Sequence[Any]], column_names: Sequence[str]) -> int: ...
    def insert_columns(self, table: str, columns: dict[str, Sequence[Any]], *,
                       dedup_token: str | None = None) -> int: ...


#: the columns of a stored check, as a row names them: the table's ``category`` column is the row's ``stratum``, the
#: project's word, as in every drift output (``drift backtest``, the gauges' label)
COLUMNS = ("check_id", "checked_at", "retriever_name", "retriever_version", "variant", "category AS stratum", "feature",
           "test", "statistic", "p_value", "p_adjusted", "effect", "threshold", "effect_threshold", "drifted",
           "n_reference", "n_current", "details", "status", "pooled_windows", "cusum", "cusum_threshold", "persistent")

#: the columns a check writes, in the order ``DriftChecker`` lays out each result's row
WRITTEN = ("check_id", "checked_at", "retriever_name", "retriever_version", "variant", "category", "feature", "test",
           "statistic", "p_value", "p_adjusted", "effect", "threshold", "effect_threshold", "drifted", "n_reference",
           "n_current", "reference_start", "reference_end", "current_start", "current_end", "details", "status",
           "pooled_windows", "cusum", "cusum_threshold", "persistent", "settings")

_EXPLAINED = ("check_id, checked_at, test, statistic, p_value, p_adjusted, effect, threshold, drifted, persistent, "
              "cusum, cusum_threshold, status, n_reference, n_current, reference_start, reference_end, current_start, "
              "current_end")
_GROUP_FEATURE = ("retriever_name = {rn:String} AND retriever_version = {rv:String} AND variant = {var:String} "
                  "AND category = {cat:String} AND feature = {f:String}")


def write_check(store: DriftStore, rows: Sequence[Sequence[Any]]) -> int:
    """Insert one check's rows (``WRITTEN`` columns, in that order); return how many."""
    return store.insert_rows("drift_checks", rows, WRITTEN)


def check_rows(store: DriftStore, check_id: str | None) -> list[dict[str, Any]]:
    """The rows (``COLUMNS``) of the check ``check_id`` (``None``: the latest stored), unsorted, ``details`` as
    text."""
    table = store.table("drift_checks")
    where = ("check_id = {id:String}" if check_id else
             f"check_id = (SELECT argMax(check_id, checked_at) FROM {table})")
    return store.query_rows(f"SELECT {', '.join(COLUMNS)} FROM {table} WHERE {where}", {"id": check_id or ""})


def latest_settings(store: DriftStore) -> dict[str, Any] | None:
    """The latest stored check's ``check_id``, ``checked_at`` and recorded ``settings`` (JSON text, '' before
    migration 0019); ``None`` when no check is stored."""
    table = store.table("drift_checks")
    rows = store.query_rows(f"SELECT check_id, checked_at, settings FROM {table} "
                            f"WHERE checked_at = (SELECT max(checked_at) FROM {table}) LIMIT 1")
    return rows[0] if rows else None


def assessed_since(store: DriftStore, since: datetime) -> list[dict[str, Any]]:
    """Per (retriever name, version, variant, ``category``, feature) of the checks at or after ``since``: when it was
    last assessed (``last_ok``, meaningful when ``n_ok`` > 0) and first seen (``first_seen``)."""
    return store.query_rows(
        f"SELECT retriever_name, retriever_version, variant, category, feature, "
        f"maxIf(checked_at, status = 'ok') AS last_ok, countIf(status = 'ok') AS n_ok, "
        f"min(checked_at) AS first_seen FROM {store.table('drift_checks')} "
        "WHERE checked_at >= fromUnixTimestamp64Milli({since:Int64}, 'UTC') "
        "GROUP BY retriever_name, retriever_version, variant, category, feature",
        {"since": int(since.timestamp() * 1000)})


def check_of_feature(store: DriftStore, *, retriever_name: str, retriever_version: str, variant: str, stratum: str,
                     feature: str, at: datetime) -> dict[str, Any] | None:
    """The latest stored row of ``feature`` in the group (retriever, variant, stratum) checked at or before ``at``,
    its most telling test first (persistent, drifted, then the largest CUSUM); ``None`` when there is none. Times come
    back as the driver returns them."""
    rows = store.query_rows(
        f"SELECT {_EXPLAINED} FROM {store.table('drift_checks')} WHERE {_GROUP_FEATURE} "
        "AND checked_at <= fromUnixTimestamp64Milli({at:Int64}, 'UTC') "
        "ORDER BY checked_at DESC, persistent DESC, drifted DESC, cusum DESC LIMIT 1",
        {"rn": retriever_name, "rv": retriever_version, "var": variant, "cat": stratum, "f": feature,
         "at": int(at.timestamp() * 1000)})
    return dict(rows[0]) if rows else None
