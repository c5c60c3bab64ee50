"""The leak listing's SQL, and the seam it reads through: ``LeakStore``.

Owns every SQL string of ``ragmon.leaks``: the leaking traces of a window (``permission_leaks > 0``), their
totals, and how many traces a filter matches at all. Reads only the columns a listing may show: never the chunk
text, the question or the answer (``listing.py`` says why). Every value is a ``{name:Type}`` parameter; only the
table name is formatted in. Must not write or decide anything.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Protocol

#: the columns a listing reads; the texts (question, answer, chunk texts) are deliberately not among them
_COLUMNS = ("trace_id, query_id, ts, retriever_name, retriever_version, variant, category, tenant, "
            "retrieved_chunk_ids, retrieved_tenants, permission_leaks")
_FILTER = ("ts >= {since:DateTime64(3)} AND ts < {until:DateTime64(3)}"
           " AND ({stratum:String} = '' OR category = {stratum:String})"
           " AND ({retriever:String} = '' OR retriever_name = {retriever:String})")
_WHERE = _FILTER + " AND permission_leaks > 0"


class LeakStore(Protocol):
    """What the leak listing reads through (``ClickHouseStore`` satisfies it). Read-only; blocking; raises
    ``StoreError``."""

    def table(self, name: str) -> str: ...

    def query_rows(self, sql: str, parameters: dict[str, Any] | None = None) -> list[dict[str, Any]]: ...


def leak_totals(store: LeakStore, since: datetime, until: datetime, stratum: str, retriever: str,
                limit: int) -> tuple[int, int]:  # fmt: skip
    """(leaking traces, leaked chunks) with ``since <= ts < until`` ('' stratum/retriever: any), FINAL."""
    params = {"since": since, "until": until, "stratum": stratum, "retriever": retriever, "limit": limit}
    [totals] = store.query_rows(f"SELECT count() AS n, sum(permission_leaks) AS leaks FROM {store.table('traces')} "
                                f"FINAL WHERE {_WHERE}", params)  # fmt: skip
    return int(totals["n"]), int(totals["leaks"] or 0)


def leaking_trace_rows(store: LeakStore, since: datetime, until: datetime, stratum: str, retriever: str,
                       limit: int) -> list[dict[str, Any]]:  # fmt: skip
    """The newest ``limit`` leaking traces' rows (``_COLUMNS``, no texts), newest first, FINAL."""
    params = {"since": since, "until": until, "stratum": stratum, "retriever": retriever, "limit": limit}
    return store.query_rows(f"SELECT {_COLUMNS} FROM {store.table('traces')} FINAL WHERE {_WHERE} "
                            "ORDER BY ts DESC, trace_id LIMIT {limit:UInt32}", params)  # fmt: skip


def count_matching(store: LeakStore, since: datetime, until: datetime, stratum: str, retriever: str) -> int:
    """Traces with ``since <= ts < until`` the stratum/retriever filter matches, leaking or not."""
    [row] = store.query_rows(f"SELECT count() AS n FROM {store.table('traces')} WHERE {_FILTER}",
                             {"since": since, "until": until, "stratum": stratum, "retriever": retriever})
    return int(row["n"])
