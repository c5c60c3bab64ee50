"""Assembling OTLP spans that arrive in different messages into one trace per query.

Owns the buffer of traces being assembled, keyed by trace id, bounded in time (``otlp_assembly_wait_seconds``
from the first span seen) and in memory (``otlp_max_pending_traces`` traces and ``otlp_max_pending_bytes`` of
the messages their spans came from, each message's bytes shared among the traces in it; the oldest goes first),
and what happens to a trace that never completes. A trace is complete when its root span (no parent) has arrived and every
parent a span names has arrived too; it is emitted at once. At the deadline or on eviction a trace with its
root is emitted marked incomplete; one without a root is dropped (no question to store). Spans arriving for
a trace already emitted are dropped. Every outcome but ``complete`` is counted by the pipeline.

Each trace holds the ledger entries of the messages its spans came from, released when it is stored or
dropped (see ``offsets.release_trace`` for why a commit never lands inside a trace). No I/O.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from dataclasses import asdict, dataclass, field

from ragmon.contracts.decode import Rejection
from ragmon.ingest.offsets import Entry, OffsetLedger
from ragmon.ingest.otlp import Span, build_document
from ragmon.ingest.source import Partition, RawMessage
from ragmon.store.trace_rows import SourcePosition

OUTCOMES = ("complete", "timed_out_emitted", "timed_out_no_root", "evicted_emitted", "evicted_no_root",
            "late_spans")


@dataclass(frozen=True, slots=True)
class Assembled:
    """A trace leaving the assembler. ``document`` is None when it was dropped (``outcome`` says why)."""

    document: bytes | None
    entries: list[Entry]
    source: SourcePosition
    outcome: str
    rejection: Rejection | None = None


@dataclass
class _Pending:
    first_seen: float
    source: SourcePosition
    spans: dict[str, Span] = field(default_factory=dict)
    entries: list[Entry] = field(default_factory=list)
    has_root: bool = False
    bytes: int = 0  # its share of the message bytes its spans came from

    def complete(self) -> bool:
        return self.has_root and all(not s.parent_span_id or s.parent_span_id in self.spans
                                     for s in self.spans.values())


class OtlpAssembler:
    """Buffers spans by trace id. Not thread-safe (the pipeline thread)."""

    def __init__(self, wait_seconds: float, max_pending: int, max_bytes: int = 268_435_456):
        self.wait_seconds = wait_seconds
        self.max_pending = max_pending
        self.max_bytes = max_bytes
        self._pending: OrderedDict[str, _Pending] = OrderedDict()
        self._emitted: OrderedDict[str, None] = OrderedDict()
        self._bytes = 0

    def pending(self) -> int:
        return len(self._pending)

    def pending_bytes(self) -> int:
        return self._bytes

    def _take(self, trace_id: str) -> _Pending:
        p = self._pending.pop(trace_id)
        self._bytes -= p.bytes
        return p

    def _evict_oldest(self) -> Assembled:
        oldest_id = next(iter(self._pending))
        return self._finish(oldest_id, self._take(oldest_id), "evicted")

    def add(self, msg: RawMessage, spans: list[Span], ledger: OffsetLedger, now: float) -> list[Assembled]:
        groups: dict[str, list[Span]] = {}
        for s in spans:
            groups.setdefault(s.trace_id, []).append(s)
        entry = ledger.track((msg.topic, msg.partition), msg.offset, len(groups))
        position = SourcePosition(msg.topic, msg.partition, msg.offset)
        share = len(msg.value) // max(1, len(groups))
        out: list[Assembled] = []
        for trace_id, group in groups.items():
            if trace_id in self._emitted:
                out.append(Assembled(None, [entry], position, "late_spans"))
                continue
            p = self._pending.get(trace_id)
            if p is None:
                while len(self._pending) >= self.max_pending:
                    out.append(self._evict_oldest())
                p = self._pending[trace_id] = _Pending(now, position)
            for s in group:
                p.spans[s.span_id] = s
                if not s.parent_span_id:
                    p.has_root = True
                    p.source = position
            p.entries.append(entry)
            p.bytes += share
            self._bytes += share
            if p.complete():
                out.append(self._finish(trace_id, self._take(trace_id), "complete"))
            while self._bytes > self.max_bytes and self._pending:  # the oldest first, this one last
                out.append(self._evict_oldest())
        return out

    def expire(self, now: float) -> list[Assembled]:
        out = []
        while self._pending:
            trace_id, p = next(iter(self._pending.items()))
            if now - p.first_seen < self.wait_seconds:
                break
            out.append(self._finish(trace_id, self._take(trace_id), "timed_out"))
        return out

    def forget(self, partitions: set[Partition]) -> None:
        """Drop traces holding spans of revoked partitions: the next owner re-reads those messages."""
        for trace_id in [t for t, p in self._pending.items() if any(e.partition in partitions for e in p.entries)]:
            self._take(trace_id)

    def _finish(self, trace_id: str, p: _Pending, why: str) -> Assembled:
        outcome = "complete" if why == "complete" else f"{why}_{'emitted' if p.has_root else 'no_root'}"
        if not p.has_root:
            return Assembled(None, p.entries, p.source, outcome)
        self._emitted[trace_id] = None
        while len(self._emitted) > 4 * self.max_pending:
            self._emitted.popitem(last=False)
        spans = list(p.spans.values())
        try:
            document = build_document(spans, incomplete=why != "complete")
        except (ValueError, TypeError, OverflowError) as exc:
            raw = json.dumps([asdict(s) for s in spans], default=str).encode()
            return Assembled(raw, p.entries, p.source, outcome,
                             Rejection("invalid_otlp", f"cannot map the spans to a trace: {exc}"[:400]))
        return Assembled(document, p.entries, p.source, outcome)
