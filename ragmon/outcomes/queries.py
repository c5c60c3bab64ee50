"""The outcome loop's SQL, and the seam it writes through: ``OutcomeStore``.

Owns every statement over ``outcomes`` that the loop runs: which of a batch's events are stored already (looked up
through the table's key: query id, kind, event id) and writing a batch's columns with its deduplication token. Every
value is a ``{name:Type}`` parameter; only the table name is formatted in. Must not decide what counts as a
re-delivery (``loop`` does).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Protocol

#: the columns of ``outcomes`` the loop writes
COLUMNS = ("event_id", "query_id", "kind", "time", "value", "received_at", "source")


class OutcomeStore(Protocol):
    """What the outcome loop reads and writes through (``ClickHouseStore`` satisfies it). Blocking; raises
    ``StoreError`` (retryable or permanent); ``insert_columns`` with the same ``dedup_token`` is idempotent."""

    def table(self, name: str) -> str: ...
    def query_rows(self, sql: str, parameters: dict[str, Any] | None = None) -> list[dict[str, Any]]: ...
    def insert_columns(self, table: str, columns: dict[str, Sequence[Any]], *,
                       dedup_token: str | None = None) -> int: ...


def stored_event_ids(store: OutcomeStore, keys: Iterable[tuple[str, str, str]]) -> set[str]:
    """The event ids of these (query id, kind, event id) keys that ``outcomes`` holds already."""
    rows = store.query_rows(
        f"SELECT DISTINCT event_id FROM {store.table('outcomes')} "
        "WHERE (query_id, kind, event_id) IN {keys:Array(Tuple(String, String, String))}", {"keys": sorted(keys)})
    return {r["event_id"] for r in rows}


def write_outcomes(store: OutcomeStore, columns: dict[str, Sequence[Any]], dedup_token: str) -> int:
    """Insert a batch's ``COLUMNS``; a batch written again with the same token is not stored twice."""
    return store.insert_columns("outcomes", columns, dedup_token=dedup_token)
