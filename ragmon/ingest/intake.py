"""Intake: raw messages → batch rows, dead letters and ledger obligations (native traces and OTLP spans).

Owns the per-message work of the ingest loop: choosing the decoder (``kafka.input_format``), validating,
rejecting traces outside the store's time range, redacting, assembling OTLP spans into traces, and recording
each message's obligations in the offset ledger. It must not write, commit or pause (the pipeline does).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from ragmon.config import IngestSettings
from ragmon.contracts.decode import DecodedTrace, Rejection, decode_trace
from ragmon.ingest.batcher import Batch
from ragmon.ingest.dead_letter import DeadLetter
from ragmon.ingest.offsets import OffsetLedger, release_trace
from ragmon.ingest.otlp import detect_format, parse_otlp
from ragmon.ingest.otlp_assembly import Assembled, OtlpAssembler
from ragmon.ingest.redact import Redactor
from ragmon.ingest.source import RawMessage
from ragmon.store.trace_rows import SourcePosition
from ragmon.telemetry import Telemetry

#: DateTime64(3) ends in 2299; a later timestamp would make the whole batch fail, so it is rejected here
_MAX_TS = datetime(2299, 12, 31, 23, 59, 59, 999_000, tzinfo=UTC)


class Intake:
    """Per-message decoding into the current batch. Not thread-safe (the pipeline thread)."""

    def __init__(self, settings: IngestSettings, telemetry: Telemetry, ledger: OffsetLedger, *,
                 input_format: str, retention_days: int, clock: Callable[[], float]):
        self.settings = settings
        self.t = telemetry
        self.ledger = ledger
        self.input_format = input_format
        self.retention = timedelta(days=retention_days)
        self.clock = clock
        self.redactor = Redactor(settings.redact_patterns, settings.redact_fields)
        self.assembler = OtlpAssembler(settings.otlp_assembly_wait_seconds, settings.otlp_max_pending_traces,
                                       settings.otlp_max_pending_bytes)
        self._batch: Batch | None = None
        self._oldest = datetime.min.replace(tzinfo=UTC)  # traces before this are outside the retention
        self._oldest_until = float("-inf")               # clock() time until which _oldest is current

    def handle(self, msg: RawMessage, batch: Batch) -> None:
        """Track the message in the ledger and add its trace or dead letter (or its spans) to ``batch``."""
        self._batch = batch
        if msg.unreadable:  # the client could not parse the record: nothing to decode, its offset still counts
            entry = self.ledger.track((msg.topic, msg.partition), msg.offset, 1)
            self._reject(msg, Rejection("unreadable_record", msg.unreadable), [entry])
            return
        fmt = detect_format(msg.value) if self.input_format == "auto" else self.input_format
        if fmt == "native":
            self._handle_native(msg)
            return
        parsed = parse_otlp(msg.value, fmt, max_bytes=self.settings.max_message_bytes)
        if isinstance(parsed, Rejection):
            self._reject(msg, parsed, [self.ledger.track((msg.topic, msg.partition), msg.offset, 1)])
            return
        for item in self.assembler.add(msg, parsed, self.ledger, self.clock()):
            self._emit(item)

    def expire(self, now: float, batch: Batch) -> None:
        """Emit or drop OTLP traces whose assembly deadline passed."""
        self._batch = batch
        for item in self.assembler.expire(now):
            self._emit(item)


    def _handle_native(self, msg: RawMessage) -> None:
        entry = self.ledger.track((msg.topic, msg.partition), msg.offset, 1)
        result = decode_trace(msg.value, max_bytes=self.settings.max_message_bytes)
        if isinstance(result, DecodedTrace):
            result = self._check_time(result)
        if isinstance(result, Rejection):
            self._reject(msg, result, [entry])
            return
        self._add(result, SourcePosition(msg.topic, msg.partition, msg.offset), [entry])

    def _add(self, decoded: DecodedTrace, source: SourcePosition, entries: list) -> None:
        if decoded.unknown_fields:
            self.t.ingest_unknown_fields.inc()
        trace = self.redactor.trace(decoded.trace)
        self._batch.add_trace(trace, source, decoded.size_bytes, entries)

    def _check_time(self, d: DecodedTrace) -> DecodedTrace | Rejection:
        ts = d.trace.timestamp
        if ts > _MAX_TS:
            return Rejection("invalid_value", f"$.timestamp {ts.isoformat()} is after 2299-12-31T23:59:59.999Z, the store's limit")
        now = self.clock()
        if now >= self._oldest_until:  # recomputed once a second: the cutoff moves by at most a second
            self._oldest, self._oldest_until = datetime.now(UTC) - self.retention, now + 1.0
        if ts < self._oldest:
            return Rejection("outside_retention", f"$.timestamp {ts.isoformat()} is older than the "
                             f"{self.retention.days}-day retention; the store would delete it on insert")
        return d

    def _emit(self, item: Assembled) -> None:
        """An OTLP trace left the assembler: decode it like a native trace, or drop it (counted)."""
        if item.outcome != "complete":
            self.t.ingest_otlp_incomplete.labels(item.outcome).inc()
        if item.document is None:          # dropped: nothing to store, its obligations close now
            release_trace(item.entries)
            return
        src = item.source
        if item.rejection is not None:
            self._reject(RawMessage(src.topic, src.partition, src.offset, item.document), item.rejection,
                         item.entries)
            return
        result = decode_trace(item.document, max_bytes=self.settings.max_message_bytes)
        if isinstance(result, DecodedTrace):
            result = self._check_time(result)
        if isinstance(result, Rejection):
            self._reject(RawMessage(src.topic, src.partition, src.offset, item.document), result, item.entries)
            return
        self._add(result, src, item.entries)

    def _reject(self, msg: RawMessage, rejection: Rejection, entries: list) -> None:
        letter = DeadLetter(msg.topic, msg.partition, msg.offset, msg.value, rejection.reason, rejection.detail,
                            msg.headers)
        self._batch.add_dead_letter(letter, entries)
