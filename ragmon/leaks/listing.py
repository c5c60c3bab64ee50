"""The traces whose retrieval leaked another tenant's chunks, read from the store for on-call.

Owns the query over ``traces`` (``permission_leaks > 0`` in a time window, newest first) and the record each
listed trace becomes: trace and query ids, time, retriever, variant, stratum, the user's tenant and each leaked
chunk with its owning tenant. Never the chunk text, the question or the answer: a listing is pasted into
tickets and chat, and a leak report must not leak the passage again. The leaked chunks are named with the rule
in force now (``ingest.shared_tenants``); ``stored_leaks`` is the count ingest made with the rule in force then.
Must not write.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from ragmon.metrics.permissions import LeakedChunk, LeakRule

#: the columns a listing reads; the texts (question, answer, chunk texts) are deliberately not among them
_COLUMNS = ("trace_id, query_id, ts, retriever_name, retriever_version, variant, category, tenant, "
            "retrieved_chunk_ids, retrieved_tenants, permission_leaks")
_FILTER = ("ts >= {since:DateTime64(3)} AND ts < {until:DateTime64(3)}"
           " AND ({stratum:String} = '' OR category = {stratum:String})"
           " AND ({retriever:String} = '' OR retriever_name = {retriever:String})")
_WHERE = _FILTER + " AND permission_leaks > 0"


class Store(Protocol):
    def table(self, name: str) -> str: ...

    def query_rows(self, sql: str, parameters: dict[str, Any] | None = None) -> list[dict[str, Any]]: ...


@dataclass(frozen=True, slots=True)
class LeakingTrace:
    """One stored trace that leaked, as on-call sees it."""

    trace_id: str
    query_id: str
    timestamp: datetime
    retriever: str  # name@version, as the metric labels it
    variant: str
    stratum: str
    user_tenant: str
    stored_leaks: int
    chunks: tuple[LeakedChunk, ...]

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "timestamp": self.timestamp.isoformat(), "chunks": [asdict(c) for c in self.chunks]}


@dataclass(frozen=True, slots=True)
class LeakListing:
    """The leaking traces of a window (newest first, at most ``limit``) and how many there were in all."""

    since: datetime
    until: datetime
    total_traces: int
    total_leaks: int
    traces: tuple[LeakingTrace, ...]
    shared_tenants: tuple[str, ...]

    def as_dict(self) -> dict[str, Any]:
        return {"since": self.since.isoformat(), "until": self.until.isoformat(), "total_traces": self.total_traces,
                "total_leaks": self.total_leaks, "shared_tenants": list(self.shared_tenants),
                "traces": [t.as_dict() for t in self.traces]}  # fmt: skip


def list_leaks(store: Store, rule: LeakRule, *, since: datetime, until: datetime, limit: int = 100,
               stratum: str = "", retriever: str = "") -> LeakListing:  # fmt: skip
    """Leaking traces with ``since <= ts < until``; ``stratum``/``retriever`` ('' = any) narrow the listing."""
    params = {"since": since, "until": until, "stratum": stratum, "retriever": retriever, "limit": limit}
    traces = store.table("traces")
    [totals] = store.query_rows(f"SELECT count() AS n, sum(permission_leaks) AS leaks FROM {traces} FINAL "
                                f"WHERE {_WHERE}", params)  # fmt: skip
    rows = store.query_rows(f"SELECT {_COLUMNS} FROM {traces} FINAL WHERE {_WHERE} "
                            "ORDER BY ts DESC, trace_id LIMIT {limit:UInt32}", params)  # fmt: skip
    return LeakListing(since, until, int(totals["n"]), int(totals["leaks"] or 0),
                       tuple(_record(r, rule) for r in rows), tuple(sorted(rule.shared_tenants)))


def traces_matching(store: Store, *, since: datetime, until: datetime, stratum: str = "", retriever: str = "") -> int:
    """How many traces of the window the ``stratum``/``retriever`` filter matches, leaking or not: 0 says a
    filter names nothing (a typo), not that nothing leaked."""
    [row] = store.query_rows(f"SELECT count() AS n FROM {store.table('traces')} WHERE {_FILTER}",
                             {"since": since, "until": until, "stratum": stratum, "retriever": retriever})
    return int(row["n"])


def _record(row: dict[str, Any], rule: LeakRule) -> LeakingTrace:
    ts = row["ts"]
    if ts.tzinfo is None:
        ts = ts.replace(tzinfo=UTC)
    return LeakingTrace(
        trace_id=row["trace_id"], query_id=row["query_id"], timestamp=ts,
        retriever=f"{row['retriever_name']}@{row['retriever_version']}", variant=row["variant"],
        stratum=row["category"], user_tenant=row["tenant"], stored_leaks=int(row["permission_leaks"]),
        chunks=tuple(rule.leaked(row["tenant"], row["retrieved_chunk_ids"], row["retrieved_tenants"])),
    )  # fmt: skip
