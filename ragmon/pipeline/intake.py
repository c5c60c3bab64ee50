"""Intake: raw messages → traces to store and dead letters, each with its ledger obligations (native and OTLP).

Owns the per-message work of the ingest loop: choosing the decoder (``kafka.input_format``), validating,
rejecting traces outside the store's time range, redacting, assembling OTLP spans into traces (counting the
skipped, repaired and incomplete ones and the documents without a score), recording each message's obligations
in the offset ledger, and the accounting of traces (``ragmon_ingest_traces_consumed_total{kind}``: a message that
is one trace, ``message``, or an OTLP trace that began assembling, ``otlp_trace``; each produced item says which
kind of trace its acknowledgement settles, and the skipped and released ones are settled here). It returns what it
produced (``batcher.Produced`` items) and must not batch, write, commit or pause (the later steps do).

``handle`` is lazy: a message is decoded when the batching step asks for the next item, so a trace goes into
the batch's buffer while its decoded form is still in the CPU cache. Decoding a whole poll first and batching
it afterwards cost ~10 µs more per trace (measured over polls of 1,000 traces of 4 KB) and held a poll's
decoded traces in memory.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from datetime import UTC, datetime, timedelta

from ragmon.config import IngestSettings, Settings
from ragmon.contracts.decode import DecodedTrace, Rejection, decode_trace
from ragmon.contracts.redact import Redactor
from ragmon.pipeline.batcher import MESSAGE, OTLP_TRACE, Produced
from ragmon.pipeline.metrics import IngestMetrics
from ragmon.pipeline.offsets import Entry, OffsetLedger, release_trace
from ragmon.pipeline.spans.otlp import Span, detect_format, parse_otlp
from ragmon.pipeline.spans.otlp_assembly import INCOMPLETE_OUTCOMES, Assembled, OtlpAssembler
from ragmon.store.trace_rows import SourcePosition
from ragmon.stream.dead_letter import DeadLetter
from ragmon.stream.source import Partition, RawMessage

#: the timestamps the store keeps as they are: the table's TTL and sort key compute in ClickHouse's DateTime and
#: Date, which end at 2106-02-07 06:28:15 and start at 1970 (migration 0012); past the end they would wrap to
#: early dates (a trace deleted as expired, invisible to time-range queries), so such a trace is rejected here
MIN_TS = datetime(1970, 1, 1, tzinfo=UTC)
MAX_TS = datetime(2106, 2, 7, 6, 28, 15, 999_000, tzinfo=UTC)


def redaction_problems(settings: Settings) -> list[str]:
    """The redaction settings' problem, if any, as a line (checked at start-up by each role that runs this loop:
    ingest, otlp)."""
    try:
        Redactor(settings.ingest.redact_patterns, settings.ingest.redact_fields, settings.ingest.redact_attributes)
    except ValueError as exc:
        return [f"ingest.redact_fields: {exc}"]
    return []


class Intake:
    """Per-message decoding for one consumer. Not thread-safe (the loop thread)."""

    def __init__(self, settings: IngestSettings, metrics: IngestMetrics, ledger: OffsetLedger, *,
                 input_format: str, retention_days: int, clock: Callable[[], float]):
        self.settings = settings
        self.t = metrics
        self.ledger = ledger
        self.input_format = input_format
        self.retention = timedelta(days=retention_days)
        self.clock = clock
        self._redactor = Redactor(settings.redact_patterns, settings.redact_fields, settings.redact_attributes)
        self._assembler = OtlpAssembler(
            settings.otlp_assembly_wait_seconds, settings.otlp_max_pending_traces, settings.otlp_max_pending_bytes,
            max_query_seconds=settings.otlp_max_query_seconds, settle_seconds=settings.otlp_settle_seconds,
            repair_seconds=settings.otlp_repair_window_seconds, max_repair_bytes=settings.otlp_max_repair_bytes)
        self._started = 0  # the assembler's traces already counted as consumed
        self._oldest = datetime.min.replace(tzinfo=UTC)  # traces before this are outside the retention
        self._oldest_until = float("-inf")               # clock() time until which _oldest is current

    def handle(self, msgs: Iterable[RawMessage]) -> Iterator[Produced]:
        """Track each message in the ledger and produce its trace or dead letter (an OTLP message: the traces
        its spans completed), in order. Lazy (see the module docstring): consume it before the next poll."""
        track = self.ledger.track
        whole = 0  # messages that are one trace each (or are rejected whole)
        try:
            for msg in msgs:
                if msg.unreadable:  # the source could not read it as a message: nothing to decode, its offset counts
                    whole += 1
                    entry = track((msg.topic, msg.partition), msg.offset, 1)
                    yield _letter(msg, msg.value, Rejection(msg.reason, msg.unreadable), [entry], msg.headers)
                    continue
                if msg.spans is not None:  # parsed by the source already (OTLP/HTTP)
                    parsed: list[Span] | Rejection = msg.spans
                else:
                    fmt = detect_format(msg.value) if self.input_format == "auto" else self.input_format
                    if fmt == "native":
                        whole += 1
                        entry = track((msg.topic, msg.partition), msg.offset, 1)
                        yield self._decoded(msg.value, SourcePosition(msg.topic, msg.partition, msg.offset), [entry],
                                            MESSAGE, msg.headers)
                        continue
                    parsed = parse_otlp(msg.value, fmt, max_bytes=self.settings.max_message_bytes)
                if isinstance(parsed, Rejection):
                    whole += 1
                    entry = track((msg.topic, msg.partition), msg.offset, 1)
                    yield _letter(msg, msg.value, parsed, [entry], msg.headers)
                    continue
                yield from self._emit_all(self._assembler.add(msg, parsed, self.ledger, self.clock()))
        finally:
            if whole:
                self.t.ingest_traces_consumed.labels(MESSAGE).inc(whole)

    def expire(self, now: float) -> Iterator[Produced]:
        """Produce (dead letters included) the OTLP traces whose assembly deadline passed; make final the skips
        whose repair window closed."""
        yield from self._emit_all(self._assembler.expire(now))

    def flush(self) -> Iterator[Produced]:
        """Produce every OTLP trace still assembling, ready or not (its input ended: no more spans can come)."""
        yield from self._emit_all(self._assembler.flush(self.clock()))

    def pending(self) -> int:
        """OTLP traces still assembling (their messages' offsets cannot be committed yet)."""
        return self._assembler.pending()

    def open_traces(self) -> int:
        """OTLP traces whose outcome is not final: assembling, or skipped with their repair window open."""
        return self._assembler.open_traces()

    def forget(self, partitions: set[Partition]) -> None:
        """Drop the OTLP traces holding spans of revoked partitions: their next owner re-reads those messages."""
        for _ in self._emit_all(self._assembler.forget(partitions)):
            pass  # only released traces and final skips: nothing to store

    def close(self) -> None:
        """The loop stops: the traces still assembling are released (their source re-reads them), the skips still
        in their repair window are final."""
        for _ in self._emit_all(self._assembler.close()):
            pass

    def take_redaction_counts(self) -> Mapping[str, int]:
        """Redactions applied since the last call, by pattern name."""
        return self._redactor.take_counts()

    # -- one trace ----------------------------------------------------------------------------------------------

    def _decoded(self, document: bytes, source: SourcePosition, entries: list[Entry], settles: str,
                 headers: tuple[tuple[str, bytes], ...] = ()) -> Produced:
        """A trace document (a message, or what an OTLP trace was mapped to) → the trace to store, or its dead
        letter (with the message's headers); ``settles`` the kind of trace its acknowledgement settles."""
        result = decode_trace(document, max_bytes=self.settings.max_message_bytes)
        if isinstance(result, DecodedTrace):
            result = self._check_time(result)
        if isinstance(result, Rejection):
            return _letter(source, document, result, entries, headers, settles)
        if result.unknown_fields:
            self.t.ingest_unknown_fields.inc()
        return (self._redactor.trace(result.trace), source, result.size_bytes, entries, settles)

    def _check_time(self, d: DecodedTrace) -> DecodedTrace | Rejection:
        ts = d.trace.timestamp
        if ts > MAX_TS:
            return Rejection("invalid_value", f"$.timestamp {ts.isoformat()} is after 2106-02-07T06:28:15.999Z, "
                             "the store's limit")
        now = self.clock()
        if now >= self._oldest_until:  # recomputed once a second: the cutoff moves by at most a second
            self._oldest, self._oldest_until = datetime.now(UTC) - self.retention, now + 1.0
        if ts < self._oldest:
            return Rejection("outside_retention", f"$.timestamp {ts.isoformat()} is older than the "
                             f"{self.retention.days}-day retention; the store would delete it on insert")
        if ts < MIN_TS:  # only reachable with a retention of more than ~56 years
            return Rejection("invalid_value", f"$.timestamp {ts.isoformat()} is before 1970-01-01T00:00:00Z, the "
                             "store's limit")
        return d

    def _emit_all(self, items: list[Assembled]) -> Iterator[Produced]:
        started = self._assembler.started
        if started != self._started:
            self.t.ingest_traces_consumed.labels(OTLP_TRACE).inc(started - self._started)
            self._started = started
        for item in items:
            out = self._emit(item)
            if out is not None:
                yield out

    def _emit(self, item: Assembled) -> Produced | None:
        """An OTLP trace left the assembler: decode it like a native trace, dead-letter it, or count it (None)."""
        t = self.t
        outcome = item.outcome
        if outcome in INCOMPLETE_OUTCOMES:
            t.ingest_otlp_incomplete.labels(outcome).inc()
        elif outcome == "repaired" and item.document is not None and item.rejection is None:
            t.ingest_otlp_repaired.inc()
        elif outcome == "skipped":  # its repair window closed with it still not a query: final
            t.ingest_otlp_skipped.labels(item.skipped).inc()
            t.ingest_traces_settled.labels(OTLP_TRACE, "skipped").inc()
            return None
        elif outcome == "released":  # given back to the source, which re-reads its messages
            t.ingest_traces_settled.labels(OTLP_TRACE, "released").inc()
            return None
        if item.unscored:
            t.ingest_otlp_unscored.inc(item.unscored)
        if item.document is None:  # skipped while its repair window is open, or re-delivered: its obligations close
            release_trace(item.entries)
            return None
        settles = OTLP_TRACE if item.settles else ""
        if item.rejection is not None:
            return _letter(item.source, item.document, item.rejection, item.entries, settles=settles)
        return self._decoded(item.document, item.source, item.entries, settles)


def _letter(where: RawMessage | SourcePosition, value: bytes, rejection: Rejection, entries: list[Entry],
            headers: tuple[tuple[str, bytes], ...] = (), settles: str = MESSAGE) -> Produced:
    """The dead letter of a rejected message (or of the document an OTLP trace was mapped to, or of its spans)."""
    return (DeadLetter(where.topic, where.partition, where.offset, value, rejection.reason, rejection.detail,
                       headers), entries, settles)
