"""Assembling OTLP spans that arrive in different messages into one trace per query, and repairing it with spans
that arrive after it was stored.

Owns the buffers, keyed by trace id, and their bounds:

- **assembling** (``otlp_max_pending_traces`` traces, ``otlp_max_pending_bytes`` of the messages their spans came
  from, each message's bytes shared among the traces in it; the oldest goes first). A trace whose root (no
  parent) and every parent a span names have arrived is emitted at once when it has the shape of a finished
  RAG query (``openinference.looks_finished``), else ``otlp_settle_seconds`` after its root arrived: the wait for
  spans of another service, or of a streamed answer, that reach ragmon after the root. At the deadline
  (``otlp_assembly_wait_seconds`` from the first span) or on eviction a trace with its root is emitted marked
  incomplete; one without a root is dropped (no question to store).
- **emitted** (``otlp_repair_window_seconds`` after emission, ``otlp_max_repair_bytes``, as many traces as the
  assembling bound): the spans of traces already emitted, stored or skipped. Spans of such a trace that arrive
  later are added and the trace is mapped again: a query becomes a new version (``repaired``; its
  ``ragmon.otlp.version`` makes the row win in the ReplacingMergeTree), a skipped trace that now has a retriever
  is stored then. Past the window its late spans are dropped and counted (``late_spans``).

A trace that is not a RAG query (``openinference.skip_reason``) leaves with ``skipped`` set and no document.
Each trace holds the ledger entries of the messages its spans came from, released when it is stored, skipped or
dropped (see ``offsets.release_trace`` for why a commit never lands inside a trace); a repair holds only the
entries of its late messages. No I/O.
"""

from __future__ import annotations

import heapq
import json
from collections import OrderedDict
from dataclasses import asdict, dataclass, field

from ragmon.contracts.decode import Rejection
from ragmon.ingest import openinference
from ragmon.ingest.offsets import Entry, OffsetLedger
from ragmon.ingest.otlp import Span
from ragmon.ingest.source import Partition, RawMessage
from ragmon.store.trace_rows import SourcePosition

#: how a trace left the assembler; the incomplete ones are counted in ragmon_ingest_otlp_incomplete_traces_total
OUTCOMES = ("complete", "settled", "timed_out_emitted", "timed_out_no_root", "evicted_emitted", "evicted_no_root",
            "shutdown_emitted", "shutdown_no_root", "late_spans", "repaired", "unchanged")
INCOMPLETE_OUTCOMES = frozenset({"timed_out_emitted", "timed_out_no_root", "evicted_emitted", "evicted_no_root",
                                 "shutdown_emitted", "shutdown_no_root", "late_spans"})


@dataclass(frozen=True, slots=True)
class Assembled:
    """A trace leaving the assembler. ``document`` is None when nothing is to be stored: dropped (``outcome`` says
    why), or not a query (``skipped`` says why)."""

    document: bytes | None
    entries: list[Entry]
    source: SourcePosition
    outcome: str
    rejection: Rejection | None = None
    skipped: str = ""
    unscored: int = 0


@dataclass
class _Pending:
    first_seen: float
    source: SourcePosition
    spans: dict[str, Span] = field(default_factory=dict)
    entries: list[Entry] = field(default_factory=list)
    root_seen: float | None = None
    bytes: int = 0  # its share of the message bytes its spans came from

    def parents_present(self) -> bool:
        return all(not s.parent_span_id or s.parent_span_id in self.spans for s in self.spans.values())


@dataclass
class _Emitted:
    at: float
    spans: dict[str, Span]
    partitions: set[Partition]
    bytes: int
    key: openinference.Key | None  # the stored version's sort key; None while it was skipped
    version: int


class OtlpAssembler:
    """Buffers spans by trace id. Not thread-safe (the pipeline thread)."""

    def __init__(self, wait_seconds: float, max_pending: int, max_bytes: int = 268_435_456, *,
                 settle_seconds: float = 0.0, repair_seconds: float = 0.0, max_repair_bytes: int = 67_108_864):
        self.wait_seconds = wait_seconds
        self.max_pending = max_pending
        self.max_bytes = max_bytes
        self.settle_seconds = min(settle_seconds, wait_seconds)
        self.repair_seconds = repair_seconds
        self.max_repair_bytes = max_repair_bytes
        self._pending: OrderedDict[str, _Pending] = OrderedDict()
        self._deadlines: list[tuple[float, int, str]] = []  # (when, sequence, trace id), stale ones skipped
        self._seq = 0
        self._bytes = 0
        self._emitted: OrderedDict[str, _Emitted] = OrderedDict()
        self._emitted_bytes = 0
        self._gone: OrderedDict[str, None] = OrderedDict()  # ids past the repair window: late spans are dropped

    def pending(self) -> int:
        return len(self._pending)

    def pending_bytes(self) -> int:
        return self._bytes

    def emitted_bytes(self) -> int:
        """Message bytes of the emitted traces kept for repairs."""
        return self._emitted_bytes

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
                out.append(self._repair(trace_id, group, entry, position, share))
                continue
            if trace_id in self._gone:
                out.append(Assembled(None, [entry], position, "late_spans"))
                continue
            p = self._pending.get(trace_id)
            if p is None:
                while len(self._pending) >= self.max_pending:
                    out.append(self._evict_oldest(now))
                p = self._pending[trace_id] = _Pending(now, position)
                self._schedule(now + self.wait_seconds, trace_id)
            for s in group:
                p.spans[s.span_id] = s
                if not s.parent_span_id:
                    p.source = position
                    if p.root_seen is None:
                        p.root_seen = now
                        self._schedule(now + self.settle_seconds, trace_id)
            p.entries.append(entry)
            p.bytes += share
            self._bytes += share
            if self._ready(p, now):
                out.append(self._finish(trace_id, self._take(trace_id), "complete", now))
            while self._bytes > self.max_bytes and self._pending:  # the oldest first, this one last
                out.append(self._evict_oldest(now))
        return out

    def expire(self, now: float) -> list[Assembled]:
        """Emit what its settle wait or deadline released; forget emitted traces past the repair window."""
        out = []
        while self._deadlines and self._deadlines[0][0] <= now:
            _, _, trace_id = heapq.heappop(self._deadlines)
            p = self._pending.get(trace_id)
            if p is None:
                continue  # already emitted: a stale deadline
            if now - p.first_seen >= self.wait_seconds:
                out.append(self._finish(trace_id, self._take(trace_id), "timed_out", now))
            elif self._ready(p, now):
                out.append(self._finish(trace_id, self._take(trace_id), "settled", now))
        while self._emitted and now - next(iter(self._emitted.values())).at >= self.repair_seconds:
            self._forget_emitted(next(iter(self._emitted)))
        return out

    def flush(self, now: float) -> list[Assembled]:
        """Emit every trace still assembling (a source with nothing to re-read is stopping): those with their root
        and parents as settled, the others as ``shutdown_*``."""
        out = []
        for trace_id in list(self._pending):
            p = self._take(trace_id)
            ready = p.root_seen is not None and p.parents_present()
            out.append(self._finish(trace_id, p, "settled" if ready else "shutdown", now))
        return out

    def forget(self, partitions: set[Partition]) -> None:
        """Drop traces holding spans of revoked partitions: the next owner re-reads those messages."""
        for trace_id in [t for t, p in self._pending.items() if any(e.partition in partitions for e in p.entries)]:
            self._take(trace_id)
        for trace_id in [t for t, e in self._emitted.items() if e.partitions & partitions]:
            self._forget_emitted(trace_id)

    # -- internals --------------------------------------------------------------------------------------------

    def _ready(self, p: _Pending, now: float) -> bool:
        if p.root_seen is None or not p.parents_present():
            return False
        return now - p.root_seen >= self.settle_seconds or openinference.looks_finished(list(p.spans.values()))

    def _schedule(self, when: float, trace_id: str) -> None:
        self._seq += 1
        heapq.heappush(self._deadlines, (when, self._seq, trace_id))

    def _take(self, trace_id: str) -> _Pending:
        p = self._pending.pop(trace_id)
        self._bytes -= p.bytes
        return p

    def _evict_oldest(self, now: float) -> Assembled:
        oldest_id = next(iter(self._pending))
        return self._finish(oldest_id, self._take(oldest_id), "evicted", now)

    def _finish(self, trace_id: str, p: _Pending, why: str, now: float) -> Assembled:
        if why in ("complete", "settled"):
            outcome = why
        else:
            outcome = f"{why}_{'emitted' if p.root_seen is not None else 'no_root'}"
        if p.root_seen is None:
            return Assembled(None, p.entries, p.source, outcome)
        spans = list(p.spans.values())
        try:
            mapped = openinference.build(spans, incomplete=not p.parents_present())
        except (ValueError, TypeError, OverflowError) as exc:
            self._remember_gone(trace_id)
            return _rejected(spans, p.entries, p.source, outcome, exc)
        self._keep(trace_id, _Emitted(now, p.spans, {e.partition for e in p.entries}, p.bytes, mapped.key, 1))
        return Assembled(mapped.document, p.entries, p.source, outcome, skipped=mapped.skipped,
                         unscored=mapped.unscored)

    def _repair(self, trace_id: str, group: list[Span], entry: Entry, position: SourcePosition,
                share: int) -> Assembled:
        """Late spans of an emitted trace: map it again with them; a query is stored as its next version."""
        e = self._emitted[trace_id]
        if all(s.span_id in e.spans for s in group):  # a re-delivered message: nothing new
            return Assembled(None, [entry], position, "unchanged")
        for s in group:
            e.spans[s.span_id] = s
        e.partitions.add(entry.partition)
        e.bytes += share
        self._emitted_bytes += share
        spans = list(e.spans.values())
        incomplete = any(s.parent_span_id and s.parent_span_id not in e.spans for s in spans)
        try:
            mapped = openinference.build(spans, incomplete=incomplete, version=e.version + (e.key is not None),
                                         key=e.key)
        except (ValueError, TypeError, OverflowError) as exc:
            self._forget_emitted(trace_id)
            return _rejected(spans, [entry], position, "repaired", exc)
        self._trim_emitted()
        if mapped.document is None:  # still not a query
            return Assembled(None, [entry], position, "unchanged", unscored=0)
        if e.key is not None:
            e.version += 1
        e.key = mapped.key
        return Assembled(mapped.document, [entry], position, "repaired", unscored=mapped.unscored)

    def _keep(self, trace_id: str, emitted: _Emitted) -> None:
        if self.repair_seconds <= 0:
            self._remember_gone(trace_id)
            return
        self._emitted[trace_id] = emitted
        self._emitted_bytes += emitted.bytes
        self._trim_emitted()

    def _trim_emitted(self) -> None:
        while self._emitted and (self._emitted_bytes > self.max_repair_bytes or len(self._emitted) > self.max_pending):
            self._forget_emitted(next(iter(self._emitted)))

    def _forget_emitted(self, trace_id: str) -> None:
        e = self._emitted.pop(trace_id)
        self._emitted_bytes -= e.bytes
        self._remember_gone(trace_id)

    def _remember_gone(self, trace_id: str) -> None:
        self._gone[trace_id] = None
        while len(self._gone) > 4 * self.max_pending:
            self._gone.popitem(last=False)


def _rejected(spans: list[Span], entries: list[Entry], source: SourcePosition, outcome: str,
              exc: Exception) -> Assembled:
    raw = json.dumps([asdict(s) for s in spans], default=str).encode()
    return Assembled(raw, entries, source, outcome,
                     Rejection("invalid_otlp", f"cannot map the spans to a trace: {exc}"[:400]))
