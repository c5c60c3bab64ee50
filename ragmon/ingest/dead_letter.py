"""Dead letters: invalid messages kept with the reason they were rejected.

Owns: the ``DeadLetter`` record, the ``DeadLetterSink`` contract, the Kafka producer implementation and an
in-memory double. A dead letter carries the ORIGINAL bytes and headers ``ragmon.reason``, ``ragmon.detail``,
``ragmon.source.topic``, ``ragmon.source.partition`` and ``ragmon.source.offset`` (plus the original
headers). It must not decide what is invalid (the decoder does) nor commit offsets (the pipeline does, and
only after ``send`` returned).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from ragmon.config import KafkaSettings
from ragmon.errors import RetryableSourceError, SourceError
from ragmon.kafka_options import producer_options

log = logging.getLogger("ragmon.ingest.dead_letter")

MAX_DETAIL_BYTES = 1_000


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """One rejected message: where it came from, why, and its original bytes."""

    topic: str
    partition: int
    offset: int
    value: bytes
    reason: str
    detail: str
    headers: tuple[tuple[str, bytes], ...] = ()

    def kafka_key(self) -> bytes:
        """The source partition: the letters of one source partition stay in order on the dead-letter topic."""
        return f"{self.topic}/{self.partition}".encode()

    def kafka_headers(self) -> list[tuple[str, bytes]]:
        own = [
            ("ragmon.reason", self.reason.encode()),
            # cut at a character boundary: a header cut inside a UTF-8 sequence is not text any more
            ("ragmon.detail", self.detail.encode("utf-8", "replace")[:MAX_DETAIL_BYTES]
             .decode("utf-8", "ignore").encode("utf-8")),
            ("ragmon.source.topic", self.topic.encode()),
            ("ragmon.source.partition", str(self.partition).encode()),
            ("ragmon.source.offset", str(self.offset).encode()),
        ]
        return own + [h for h in self.headers if not h[0].startswith("ragmon.")]


class DeadLetterSink(Protocol):
    """Where dead letters go.

    ``send`` blocks until every letter is acknowledged, or raises ``RetryableSourceError`` (nothing may be
    assumed sent; sending again may duplicate some letters: dead letters are at-least-once, with no dedup).
    Sending nothing is a no-op. ``close`` delivers what was sent, may be called twice, and after it ``send``
    raises ``SourceError``. Not thread-safe.
    """

    def send(self, letters: Sequence[DeadLetter]) -> None: ...

    def close(self) -> None: ...


class KafkaDeadLetterSink:
    """Produces dead letters to ``kafka.dead_letter_topic`` with acks=all, keyed by source partition."""

    def __init__(self, settings: KafkaSettings, *, timeout_seconds: float = 30.0):
        from kafka import KafkaProducer
        from kafka.errors import KafkaError

        self._topic = settings.dead_letter_topic
        self._timeout = timeout_seconds
        self._kafka_error = KafkaError
        self._closed = False
        try:
            self._producer = KafkaProducer(**producer_options(settings, client_id="ragmon-ingest-dlq"))
        except KafkaError as exc:
            raise SourceError(
                f"cannot create the dead-letter producer for {settings.bootstrap_servers} ({exc}); check "
                "kafka.bootstrap_servers and that the broker is up"
            ) from None

    def send(self, letters: Sequence[DeadLetter]) -> None:
        if not letters:
            return
        if self._closed:
            raise SourceError(f"the dead-letter producer for {self._topic} is closed")
        try:
            futures = [
                self._producer.send(self._topic, value=d.value, key=d.kafka_key(), headers=d.kafka_headers())
                for d in letters
            ]
            self._producer.flush(timeout=self._timeout)
            for f in futures:
                f.get(timeout=self._timeout)
        except (self._kafka_error, TimeoutError) as exc:
            raise RetryableSourceError(
                f"producing {len(letters)} dead letter(s) to {self._topic} failed: {type(exc).__name__}: {exc}"
            ) from None

    def close(self) -> None:
        self._closed = True
        try:
            self._producer.close(timeout=5)
        except Exception as exc:  # noqa: BLE001 - best effort
            log.warning("closing the dead-letter producer failed: %s", exc)


@dataclass
class InMemoryDeadLetterSink:
    """Test double: keeps letters in a list; ``fail_next`` makes that many ``send`` calls fail (nothing sent)."""

    letters: list[DeadLetter] = field(default_factory=list)
    fail_next: int = 0
    calls: int = 0
    closed: bool = False

    def send(self, letters: Sequence[DeadLetter]) -> None:
        if not letters:
            return
        if self.closed:
            raise SourceError("the in-memory dead-letter sink is closed")
        self.calls += 1
        if self.fail_next > 0:
            self.fail_next -= 1
            raise RetryableSourceError("in-memory dead-letter failure (test)")
        self.letters.extend(letters)

    def close(self) -> None:
        self.closed = True
