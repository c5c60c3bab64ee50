"""Assembling OTLP spans that arrive in different messages into one trace per query, and repairing it with spans
that arrive after it was stored.

Owns the buffers, keyed by trace id, their bounds, and each trace's final outcome:

- **assembling** (``otlp_max_pending_traces`` traces, ``otlp_max_pending_bytes`` of the messages their spans came
  from, each message's bytes shared among the traces in it; the oldest goes first). Two clocks. Spans without
  their root (no parent: the query's own span, which ends last, after the LLM's answer) wait for it
  ``otlp_max_query_seconds`` from the trace's first span: the longest query stored whole. Once the root has
  arrived, a trace whose every parent a span names has arrived too is emitted at once when it has the shape of a
  finished RAG query (``openinference.looks_finished``), else ``otlp_settle_seconds`` after its root arrived (the
  wait for another service's spans, a streamed answer's); one still missing a parent is emitted marked incomplete
  ``otlp_assembly_wait_seconds`` after its root arrived. A trace whose root never arrived (deadline, eviction past
  a bound, an input that ended) is dead-lettered (``otlp_no_root``) with the spans that did: never dropped.
- **emitted** (``otlp_repair_window_seconds`` after emission, ``otlp_max_repair_bytes``, as many traces as the
  assembling bound): the spans of traces already emitted, stored or skipped. Spans of such a trace that arrive
  later are added and the trace is mapped again: a query becomes a new version (``repaired``; its
  ``ragmon.otlp.version`` makes the row win in the ReplacingMergeTree), a skipped trace that now has a retriever
  is stored then. Past the window its late spans are dead-lettered (``otlp_late_spans``) and counted
  (``late_spans``).

A trace that is not a RAG query (``openinference.skip_reason``) leaves with ``skipped`` set and no document; its
skip is final (an ``Assembled`` of outcome ``skipped``) only when its repair window closes with it still skipped.
Every trace that begins assembling (``started``) ends in exactly one item with ``settles`` set: stored (its first
document), dead-lettered, skipped (final), or ``released`` (given back to a source that re-reads it: a revoked
partition, ``close``). Each trace holds the ledger entries of the messages its spans came from, released when it
is stored, skipped or dead-lettered (see ``offsets.release_trace`` for why a commit never lands inside a trace); a
repair holds only the entries of its late messages. No I/O.
"""

from __future__ import annotations

import heapq
import json
from collections import OrderedDict
from dataclasses import asdict, dataclass, field

from ragmon.contracts.decode import Rejection
from ragmon.pipeline.offsets import Entry, OffsetLedger
from ragmon.pipeline.spans import openinference
from ragmon.pipeline.spans.conventions import canonical
from ragmon.pipeline.spans.otlp import Span
from ragmon.store.trace_rows import SourcePosition
from ragmon.stream.source import Partition, RawMessage

#: how a trace left the assembler (or a late message went); the incomplete ones are counted in
#: ragmon_ingest_otlp_incomplete_traces_total. ``ended_*``: its input ended (a file read to its end)
OUTCOMES = ("complete", "settled", "timed_out_emitted", "timed_out_no_root", "evicted_emitted", "evicted_no_root",
            "ended_emitted", "ended_no_root", "late_spans", "repaired", "unchanged", "skipped", "released")
INCOMPLETE_OUTCOMES = frozenset({"timed_out_emitted", "timed_out_no_root", "evicted_emitted", "evicted_no_root",
                                 "ended_emitted", "ended_no_root", "late_spans"})
#: the dead-letter reasons of spans that could not be made a trace
NO_ROOT, LATE_SPANS = "otlp_no_root", "otlp_late_spans"
_NOWHERE = SourcePosition()


@dataclass(frozen=True, slots=True)
class Assembled:
    """A trace leaving the assembler, or what became of a late message. ``document`` is the trace to store, or
    with ``rejection`` the dead letter's value; None when nothing is to be stored (``skipped`` says why a trace is
    not a query, ``outcome`` the rest). ``settles``: this is the trace's final outcome, counted once (its first
    storing, its dead letter, its final skip, or ``released``: given back to a source that re-reads it, whose
    entries must not be released)."""

    document: bytes | None
    entries: list[Entry]
    source: SourcePosition
    outcome: str
    rejection: Rejection | None = None
    skipped: str = ""
    unscored: int = 0
    settles: bool = False


@dataclass
class _Pending:
    first_seen: float
    deadline: float  # first span + otlp_max_query_seconds; once the root arrived, root + otlp_assembly_wait_seconds
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
    key: openinference.Key | None  # the stored version's sort key; None while it is skipped
    version: int
    skipped: str = ""  # why it is not a query, while key is None
    unscored: int = 0  # its documents without a score, counted already (a later version counts only new ones)


class OtlpAssembler:
    """Buffers spans by trace id. Not thread-safe (the pipeline thread)."""

    def __init__(self, wait_seconds: float, max_pending: int, max_bytes: int = 268_435_456, *,
                 max_query_seconds: float = 600.0, settle_seconds: float = 0.0, repair_seconds: float = 0.0,
                 max_repair_bytes: int = 67_108_864):
        self.wait_seconds = wait_seconds
        self.max_query_seconds = max_query_seconds
        self.max_pending = max_pending
        self.max_bytes = max_bytes
        self.settle_seconds = min(settle_seconds, wait_seconds)
        self.repair_seconds = repair_seconds
        self.max_repair_bytes = max_repair_bytes
        #: traces that began assembling so far (each ends in one ``settles`` item)
        self.started = 0
        self._pending: OrderedDict[str, _Pending] = OrderedDict()
        self._deadlines: list[tuple[float, int, str]] = []  # (when, sequence, trace id), stale ones skipped
        self._seq = 0
        self._bytes = 0
        self._emitted: OrderedDict[str, _Emitted] = OrderedDict()
        self._emitted_bytes = 0
        self._held_skips = 0  # emitted traces still skipped, their repair window open
        self._gone: OrderedDict[str, None] = OrderedDict()  # ids past the repair window: late spans dead-lettered
        self._final: list[Assembled] = []  # skips made final while something else ran, handed out next

    def pending(self) -> int:
        return len(self._pending)

    def pending_bytes(self) -> int:
        return self._bytes

    def emitted_bytes(self) -> int:
        """Message bytes of the emitted traces kept for repairs."""
        return self._emitted_bytes

    def open_traces(self) -> int:
        """Traces whose outcome is not final yet: assembling, or skipped with their repair window open."""
        return len(self._pending) + self._held_skips

    def add(self, msg: RawMessage, spans: list[Span], ledger: OffsetLedger, now: float) -> list[Assembled]:
        groups: dict[str, list[Span]] = {}
        for s in spans:  # each span read by its own convention, once, as the mapping reads it (OpenInference)
            groups.setdefault(s.trace_id, []).append(canonical(s))
        entry = ledger.track((msg.topic, msg.partition), msg.offset, len(groups))
        position = SourcePosition(msg.topic, msg.partition, msg.offset)
        share = len(msg.value) // max(1, len(groups))
        out: list[Assembled] = []
        for trace_id, group in groups.items():
            if trace_id in self._emitted:
                out.append(self._repair(trace_id, group, entry, position, share))
                continue
            if trace_id in self._gone:
                out.append(_letter(group, [entry], position, "late_spans", LATE_SPANS,
                                   f"{len(group)} span(s) of trace {trace_id} arrived after it was stored and its "
                                   f"repair window (ingest.otlp_repair_window_seconds, {self.repair_seconds:g} s) "
                                   "closed, or after it was dead-lettered"))
                continue
            p = self._pending.get(trace_id)
            if p is None:
                while len(self._pending) >= self.max_pending:
                    out.append(self._evict_oldest(now))
                p = self._pending[trace_id] = _Pending(now, now + self.max_query_seconds, position)
                self.started += 1
                self._schedule(p.deadline, trace_id)
            for s in group:
                p.spans[s.span_id] = s
                if not s.parent_span_id:
                    p.source = position
                    if p.root_seen is None:
                        p.root_seen = now
                        p.deadline = now + self.wait_seconds
                        self._schedule(now + self.settle_seconds, trace_id)
                        self._schedule(p.deadline, trace_id)
            p.entries.append(entry)
            p.bytes += share
            self._bytes += share
            if self._ready(p, now):
                out.append(self._finish(trace_id, self._take(trace_id), "complete", now))
            while self._bytes > self.max_bytes and self._pending:  # the oldest first, this one last
                out.append(self._evict_oldest(now))
        return self._with_final(out)

    def expire(self, now: float) -> list[Assembled]:
        """Emit what its settle wait or deadline released; forget emitted traces past the repair window."""
        out = []
        while self._deadlines and self._deadlines[0][0] <= now:
            _, _, trace_id = heapq.heappop(self._deadlines)
            p = self._pending.get(trace_id)
            if p is None:
                continue  # already emitted: a stale deadline
            if now >= p.deadline:
                out.append(self._finish(trace_id, self._take(trace_id), "timed_out", now))
            elif self._ready(p, now):
                out.append(self._finish(trace_id, self._take(trace_id), "settled", now))
        while self._emitted and now - next(iter(self._emitted.values())).at >= self.repair_seconds:
            self._forget_emitted(next(iter(self._emitted)))
        return self._with_final(out)

    def flush(self, now: float) -> list[Assembled]:
        """Emit every trace still assembling (its input ended: no more spans can come): those with their root and
        parents as settled, the others as ``ended_*`` (without a root: dead-lettered)."""
        out = []
        for trace_id in list(self._pending):
            p = self._take(trace_id)
            ready = p.root_seen is not None and p.parents_present()
            out.append(self._finish(trace_id, p, "settled" if ready else "ended", now))
        return self._with_final(out)

    def forget(self, partitions: set[Partition]) -> list[Assembled]:
        """Give up the traces holding spans of revoked partitions: those assembling are ``released`` (the next owner
        re-reads their messages), the emitted ones forgotten (a skip becomes final)."""
        out = [self._released(self._take(t)) for t, p in list(self._pending.items())
               if any(e.partition in partitions for e in p.entries)]
        for trace_id in [t for t, e in self._emitted.items() if e.partitions & partitions]:
            self._forget_emitted(trace_id)
        return self._with_final(out)

    def close(self) -> list[Assembled]:
        """The loop stops and its source re-reads what is uncommitted: every trace assembling is ``released``,
        every skip still waiting for its repair window final."""
        out = [self._released(self._take(t)) for t in list(self._pending)]
        for trace_id in list(self._emitted):
            self._forget_emitted(trace_id)
        return self._with_final(out)

    # -- internals --------------------------------------------------------------------------------------------

    def _with_final(self, out: list[Assembled]) -> list[Assembled]:
        if self._final:
            out.extend(self._final)
            self._final = []
        return out

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

    @staticmethod
    def _released(p: _Pending) -> Assembled:
        return Assembled(None, p.entries, p.source, "released", settles=True)

    def _evict_oldest(self, now: float) -> Assembled:
        oldest_id = next(iter(self._pending))
        return self._finish(oldest_id, self._take(oldest_id), "evicted", now)

    def _finish(self, trace_id: str, p: _Pending, why: str, now: float) -> Assembled:
        if why in ("complete", "settled"):
            outcome = why
        else:
            outcome = f"{why}_{'emitted' if p.root_seen is not None else 'no_root'}"
        spans = list(p.spans.values())
        if p.root_seen is None:
            self._remember_gone(trace_id)
            return _letter(spans, p.entries, p.source, outcome, NO_ROOT,
                           f"{self._no_root(why)}; the {len(spans)} span(s) of trace {trace_id} that did", settles=True)
        try:
            mapped = openinference.build(spans, incomplete=not p.parents_present())
        except (ValueError, TypeError, OverflowError) as exc:
            self._remember_gone(trace_id)
            return _letter(spans, p.entries, p.source, outcome, "invalid_otlp",
                           f"cannot map the spans to a trace: {exc}", settles=True)
        self._keep(trace_id, _Emitted(now, p.spans, {e.partition for e in p.entries}, p.bytes, mapped.key, 1,
                                      mapped.skipped, mapped.unscored))
        return Assembled(mapped.document, p.entries, p.source, outcome, skipped=mapped.skipped,
                         unscored=mapped.unscored, settles=mapped.document is not None)

    def _no_root(self, why: str) -> str:
        if why == "timed_out":
            return (f"no root span arrived within ingest.otlp_max_query_seconds ({self.max_query_seconds:g} s) of "
                    "the trace's first span")
        if why == "evicted":
            return (f"evicted before its root span arrived: more than ingest.otlp_max_pending_traces "
                    f"({self.max_pending}) traces or ingest.otlp_max_pending_bytes ({self.max_bytes}) of their "
                    "messages were assembling")
        return "its input ended (a file read to its end) before its root span arrived"

    def _repair(self, trace_id: str, group: list[Span], entry: Entry, position: SourcePosition,
                share: int) -> Assembled:
        """Late spans of an emitted trace: map it again with them; a query is stored as its next version, a
        skipped trace that became a query is stored (its final outcome)."""
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
        was_skipped = e.key is None
        try:
            mapped = openinference.build(spans, incomplete=incomplete, version=e.version + (not was_skipped),
                                         key=e.key)
        except (ValueError, TypeError, OverflowError) as exc:
            self._forget_emitted(trace_id, final=False)  # the dead letter is a skipped trace's final outcome
            return _letter(spans, [entry], position, "repaired", "invalid_otlp",
                           f"cannot map the spans to a trace: {exc}", settles=was_skipped)
        if mapped.document is None:  # still not a query
            self._trim_emitted()
            return Assembled(None, [entry], position, "unchanged")
        if was_skipped:
            self._held_skips -= 1
            e.skipped = ""
        else:
            e.version += 1
        e.key = mapped.key
        unscored, e.unscored = max(0, mapped.unscored - e.unscored), max(e.unscored, mapped.unscored)
        self._trim_emitted()
        return Assembled(mapped.document, [entry], position, "repaired", unscored=unscored, settles=was_skipped)

    def _keep(self, trace_id: str, emitted: _Emitted) -> None:
        if self.repair_seconds <= 0:
            self._remember_gone(trace_id)
            if emitted.key is None:
                self._final.append(_final_skip(emitted))
            return
        self._emitted[trace_id] = emitted
        self._emitted_bytes += emitted.bytes
        self._held_skips += emitted.key is None
        self._trim_emitted()

    def _trim_emitted(self) -> None:
        while self._emitted and (self._emitted_bytes > self.max_repair_bytes or len(self._emitted) > self.max_pending):
            self._forget_emitted(next(iter(self._emitted)))

    def _forget_emitted(self, trace_id: str, *, final: bool = True) -> None:
        e = self._emitted.pop(trace_id)
        self._emitted_bytes -= e.bytes
        self._remember_gone(trace_id)
        if e.key is None:
            self._held_skips -= 1
            if final:
                self._final.append(_final_skip(e))

    def _remember_gone(self, trace_id: str) -> None:
        self._gone[trace_id] = None
        while len(self._gone) > 4 * self.max_pending:
            self._gone.popitem(last=False)


def _final_skip(e: _Emitted) -> Assembled:
    return Assembled(None, [], _NOWHERE, "skipped", skipped=e.skipped, settles=True)


def _letter(spans: list[Span], entries: list[Entry], source: SourcePosition, outcome: str, reason: str, detail: str,
            *, settles: bool = False) -> Assembled:
    """Spans that cannot be stored as a trace, as a dead letter: their JSON, the reason and what happened."""
    raw = json.dumps([asdict(s) for s in spans], default=str).encode()
    return Assembled(raw, entries, source, outcome, Rejection(reason, detail[:400]), settles=settles)
