"""``HttpTraceSource``: the requests the OTLP/HTTP receiver accepted, as a ``TraceSource`` the ingest loop polls.

Owns a bounded queue (``otlp.max_queued_bytes``) between the HTTP server's threads, which ``offer`` requests, and
the ingest loop, which ``poll``s them, and the spool behind it (``http_spool``: every request is written there
before it is queued, and so before it is answered 200). Each request is one message of the pseudo-topic
``otlp-http`` (partition 0) whose offset is its position in the spool, with its spans already parsed. ``commit``
records the position in the spool, which then forgets what is before it; at start the requests after the
committed position (what the last process accepted and did not store, or held for traces still assembling) are
polled first, read back from the spool. So a restart, even after ``kill -9``, re-reads what was not stored, as a
Kafka consumer does. ``offer`` refuses (the receiver answers 503, and the exporter retries) while the queue is
full, while the loop is paused because store writes fail, while the spool is full or cannot be written, and once
closed. It must not answer HTTP (``receiver`` does).
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Iterator, Mapping

from ragmon.contracts.decode import Rejection
from ragmon.errors import RetryableSourceError
from ragmon.otlp.http_spool import HttpSpool, SpoolError, SpoolFull, SpoolRecord
from ragmon.pipeline.spans.otlp import decode_request, request_spans
from ragmon.stream.source import LocalPosition, Partition, RawMessage, RevokeHandler

log = logging.getLogger(__name__)

TOPIC = "otlp-http"
PARTITION: Partition = (TOPIC, 0)


class HttpTraceSource(LocalPosition):
    """Thread-safe between ``offer`` (any thread) and the loop's methods (one thread)."""

    def __init__(self, max_queued_bytes: int, spool: HttpSpool):
        self.max_queued_bytes = max_queued_bytes
        self.spool = spool
        self._queue: deque[RawMessage] = deque()
        self._bytes = 0
        self._paused = False
        self._closed = False
        self._ready = threading.Condition()
        self.committed: dict[Partition, int] = {PARTITION: spool.committed}
        self._replay: Iterator[SpoolRecord] | None = spool.replay() if spool.replay_records else None
        self._replay_left = spool.replay_records

    # -- the receiver's side --------------------------------------------------------------------------------

    def offer(self, value: bytes, spans: list[object], headers: tuple[tuple[str, bytes], ...] = (), *,
              fmt: str = "otlp_proto") -> str:
        """Spool and queue one request's spans (``value``: its body as ``fmt``); '' when done, else why not:
        'busy' (queue full or loop paused), 'spool_full', 'spool_error', 'closed'."""
        with self._ready:
            if self._closed:
                return "closed"
            if self._paused or (self._queue and self._bytes + len(value) > self.max_queued_bytes):
                return "busy"  # one request larger than the bound alone still goes through an empty queue
            try:
                offset = self.spool.append(value, fmt)
            except SpoolFull:
                return "spool_full"
            except SpoolError as exc:
                log.error("OTLP/HTTP request refused (503): %s", exc)
                return "spool_error"
            self._queue.append(RawMessage(TOPIC, 0, offset, value, headers, spans=list(spans)))
            self._bytes += len(value)
            self._ready.notify()
        return ""

    def queued_bytes(self) -> int:
        with self._ready:
            return self._bytes

    @property
    def paused(self) -> bool:
        return self._paused

    def resume(self) -> None:
        with self._ready:
            self._paused = False
            self._ready.notify_all()

    # -- the TraceSource the loop polls -------------------------------------------------------------------------

    def set_revoke_handler(self, handler: RevokeHandler) -> None:
        """Nothing is ever revoked: the receiver owns its one partition."""

    def poll(self, timeout_seconds: float, max_records: int) -> list[RawMessage]:
        """The next requests: those read again from the spool first, then those queued. Nothing while paused (the
        loop ignores what a poll returns then, as a paused Kafka consumer returns nothing)."""
        if self._replay is not None and not self._paused:
            replayed = self._replayed(max_records)
            if replayed:
                return replayed
        with self._ready:
            if (self._paused or not self._queue) and timeout_seconds > 0 and not self._closed:
                self._ready.wait(timeout_seconds)
            if self._paused:
                return []
            out: list[RawMessage] = []
            while self._queue and len(out) < max_records:
                msg = self._queue.popleft()
                self._bytes -= len(msg.value)
                out.append(msg)
            return out

    def commit(self, offsets: Mapping[Partition, int]) -> None:
        super().commit(offsets)
        try:
            self.spool.commit(self.committed[PARTITION])
        except SpoolError as exc:
            raise RetryableSourceError(f"OTLP/HTTP spool: {exc}") from None

    def assignment(self) -> set[Partition]:
        return {PARTITION}

    def lag(self) -> dict[Partition, int]:
        with self._ready:
            return {PARTITION: self._replay_left + len(self._queue)}

    def close(self) -> None:
        """Refuse further requests and give the spool up (after the loop's last commit)."""
        with self._ready:
            self._closed = True
            self._ready.notify_all()
            self.spool.close()

    # -- replay ---------------------------------------------------------------------------------------------

    def _replayed(self, max_records: int) -> list[RawMessage]:
        assert self._replay is not None
        out: list[RawMessage] = []
        for record in self._replay:
            out.append(_message(record))
            if len(out) >= max_records:
                break
        else:
            self._replay = None
        self._replay_left = max(0, self._replay_left - len(out))
        return out


def _message(record: SpoolRecord) -> RawMessage:
    """A spooled request as the message it was: its spans parsed again as the receiver parsed them."""
    decoded = decode_request(record.body, record.fmt)
    parsed = decoded if isinstance(decoded, Rejection) else request_spans(decoded, strict=False)
    if isinstance(parsed, Rejection):  # it was parsed once: only a changed parser could refuse it now
        return RawMessage(TOPIC, 0, record.offset, record.body, (), -1,
                          f"the spooled request cannot be read as OTLP again: {parsed.detail}", "invalid_otlp")
    return RawMessage(TOPIC, 0, record.offset, record.body, spans=list(parsed.spans))
