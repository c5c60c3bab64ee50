"""The traces whose retrieval leaked another tenant's chunks, read from the store for on-call.

Owns the listing of ``traces`` with ``permission_leaks > 0`` in a time window, newest first (its SQL is in
``queries.py``), and the record each listed trace becomes: trace and query ids, time, retriever, variant, stratum,
the user's tenant and each leaked chunk with its owning tenant. Never the chunk text, the question or the answer: a
listing is pasted into tickets and chat, and a leak report must not leak the passage again. The leaked chunks are
named with the rule in force now (``ingest.shared_tenants``); ``stored_leaks`` is the count ingest made with the
rule in force then. Must not write.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any

from ragmon.leaks.queries import LeakStore, count_matching, leak_totals, leaking_trace_rows
from ragmon.metrics.permissions import LeakedChunk, LeakRule


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


def list_leaks(store: LeakStore, rule: LeakRule, *, since: datetime, until: datetime, limit: int = 100,
               stratum: str = "", retriever: str = "") -> LeakListing:  # fmt: skip
    """Leaking traces with ``since <= ts < until``; ``stratum``/``retriever`` ('' = any) narrow the listing."""
    n, leaks = leak_totals(store, since, until, stratum, retriever, limit)
    rows = leaking_trace_rows(store, since, until, stratum, retriever, limit)
    return LeakListing(since, until, n, leaks,
                       tuple(_record(r, rule) for r in rows), tuple(sorted(rule.shared_tenants)))


def traces_matching(store: LeakStore, *, since: datetime, until: datetime, stratum: str = "",
                    retriever: str = "") -> int:  # fmt: skip
    """How many traces of the window the ``stratum``/``retriever`` filter matches, leaking or not: 0 says a
    filter names nothing (a typo), not that nothing leaked."""
    return count_matching(store, since, until, stratum, retriever)


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
