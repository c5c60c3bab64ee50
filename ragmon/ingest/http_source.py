"""``HttpTraceSource``: the requests the OTLP/HTTP receiver accepted, as a ``TraceSource`` the ingest loop polls.

Owns a bounded queue (``otlp.max_queued_bytes``) between the HTTP server's threads, which ``offer`` requests, and
the ingest loop, which ``poll``s them. Each request is one message of the pseudo-topic ``otlp-http`` (partition 0,
offsets numbered from 0 in this process), with its spans already parsed. ``offer`` refuses (the receiver answers
503, and the exporter retries) while the queue is full, while the loop is paused because store writes fail, and
once closed. There is nothing to re-read after a crash (``replayable`` is False): the loop stores what it holds at
shutdown instead of leaving it for a re-read, and commits are no-ops. It must not parse or answer HTTP
(``otlp_http`` does).
"""

from __future__ import annotations

import threading
from collections import deque

from ragmon.ingest.source import LocalPosition, Partition, RawMessage, RevokeHandler

TOPIC = "otlp-http"
PARTITION: Partition = (TOPIC, 0)


class HttpTraceSource(LocalPosition):
    """Thread-safe between ``offer`` (any thread) and the loop's methods (one thread)."""

    #: requests are not kept anywhere once accepted: the loop flushes what is assembling when it stops
    replayable = False

    def __init__(self, max_queued_bytes: int):
        self.max_queued_bytes = max_queued_bytes
        self._queue: deque[RawMessage] = deque()
        self._bytes = 0
        self._next_offset = 0
        self._paused = False
        self._closed = False
        self._ready = threading.Condition()
        self.committed: dict[Partition, int] = {}

    # -- the receiver's side --------------------------------------------------------------------------------

    def offer(self, value: bytes, spans: list[object], headers: tuple[tuple[str, bytes], ...] = ()) -> str:
        """Queue one request's spans; '' when queued, else why not ('busy': full or paused, 'closed')."""
        with self._ready:
            if self._closed:
                return "closed"
            if self._paused or (self._queue and self._bytes + len(value) > self.max_queued_bytes):
                return "busy"  # one request larger than the bound alone still goes through an empty queue
            self._queue.append(RawMessage(TOPIC, 0, self._next_offset, value, headers, spans=list(spans)))
            self._next_offset += 1
            self._bytes += len(value)
            self._ready.notify()
        return ""

    def queued_bytes(self) -> int:
        with self._ready:
            return self._bytes

    @property
    def paused(self) -> bool:
        return self._paused

    # -- the TraceSource the loop polls -------------------------------------------------------------------------

    def set_revoke_handler(self, handler: RevokeHandler) -> None:
        """Nothing is ever revoked: the receiver owns its one partition."""

    def poll(self, timeout_seconds: float, max_records: int) -> list[RawMessage]:
        with self._ready:
            if not self._queue and timeout_seconds > 0 and not self._closed:
                self._ready.wait(timeout_seconds)
            out: list[RawMessage] = []
            while self._queue and len(out) < max_records:
                msg = self._queue.popleft()
                self._bytes -= len(msg.value)
                out.append(msg)
            return out

    def assignment(self) -> set[Partition]:
        return {PARTITION}

    def lag(self) -> dict[Partition, int]:
        with self._ready:
            return {PARTITION: len(self._queue)}

    def close(self) -> None:
        with self._ready:
            self._closed = True
            self._ready.notify_all()
