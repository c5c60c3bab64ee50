"""Dead letters: invalid messages kept with the reason they were rejected.

Owns: the ``DeadLetter`` record and how a too-large one is cut, the ``DeadLetterSink`` contract, the Kafka
producer implementation and an in-memory double (a file one is in ``dead_letter_file.py``). A dead letter
carries the ORIGINAL bytes and headers ``ragmon.reason``, ``ragmon.detail``, ``ragmon.source.topic``,
``ragmon.source.partition`` and ``ragmon.source.offset`` (plus the original headers). It must not decide what is
invalid (the decoder does) nor commit offsets (the pipeline does, and only after ``send`` returned).

A letter that cannot be produced whole (over ``kafka.dead_letter_max_message_bytes``, or refused by the broker as
too large or invalid) is produced cut: reason ``too_large``, the first bytes of the value, the original headers
that fit, and ``ragmon.original.reason`` / ``.bytes`` / ``.sha256``. Produce errors, decided here:

- the letter's own (``MessageSizeTooLargeError``, ``RecordListTooLargeError``, ``InvalidRecordError``,
  ``CorruptRecordError``): permanent for that letter; it is cut (then, if refused again, sent without its value
  and headers) and the rest goes on: a dead letter never stalls ingest;
- transient (kafka-python's retriable errors, timeouts, no broker): ``RetryableSourceError``; nothing is
  committed and the batch is retried with backoff;
- anything else (authorization, an unknown error): ``SourceError`` (permanent: retried at the longest backoff,
  nothing committed, until someone fixes the topic or the credentials), and the producer is rebuilt in case
  it was left unusable.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol

from ragmon.config import KafkaSettings
from ragmon.errors import RetryableSourceError, SourceError
from ragmon.kafka_options import producer_options

log = logging.getLogger(__name__)

MAX_DETAIL_BYTES = 1_000
#: a cut letter keeps this much of the value, and of the original headers (whole headers, in order, while they fit)
CUT_VALUE_BYTES = 1_024
CUT_HEADER_BYTES = 1_024
#: what a record adds to a letter's value and headers (lengths, offsets, timestamps: generous)
RECORD_OVERHEAD_BYTES = 100


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """One rejected message: where it came from, why, and its original bytes (or their first bytes: ``cut``)."""

    topic: str
    partition: int
    offset: int
    value: bytes
    reason: str
    detail: str
    headers: tuple[tuple[str, bytes], ...] = ()
    #: set on a cut letter: the original's reason, size in bytes and SHA-256 (hex)
    original: tuple[str, int, str] | None = None

    def kafka_key(self) -> bytes:
        """The source partition: the letters of one source partition stay in order on the dead-letter topic."""
        return f"{self.topic}/{self.partition}".encode()

    def detail_text(self) -> str:
        """The detail cut to ``MAX_DETAIL_BYTES`` of UTF-8, at a character boundary (a header cut inside a UTF-8
        sequence is not text any more)."""
        return self.detail.encode("utf-8", "replace")[:MAX_DETAIL_BYTES].decode("utf-8", "ignore")

    def kafka_headers(self) -> list[tuple[str, bytes]]:
        own = [
            ("ragmon.reason", self.reason.encode()),
            ("ragmon.detail", self.detail_text().encode("utf-8")),
            ("ragmon.source.topic", self.topic.encode()),
            ("ragmon.source.partition", str(self.partition).encode()),
            ("ragmon.source.offset", str(self.offset).encode()),
        ]
        if self.original is not None:
            reason, size, sha256 = self.original
            own += [("ragmon.original.reason", reason.encode()), ("ragmon.original.bytes", str(size).encode()),
                    ("ragmon.original.sha256", sha256.encode())]
        return own + [h for h in self.headers if not h[0].startswith("ragmon.")]

    def size_bytes(self) -> int:
        """About what the letter weighs as a Kafka record: key, value, headers and framing."""
        return (len(self.kafka_key()) + len(self.value) + RECORD_OVERHEAD_BYTES
                + sum(len(k.encode("utf-8", "replace")) + len(v) for k, v in self.kafka_headers()))

    @property
    def cut(self) -> bool:
        return self.original is not None

    def cut_to(self, value_bytes: int = CUT_VALUE_BYTES, header_bytes: int = CUT_HEADER_BYTES) -> DeadLetter:
        """This letter made small: reason ``too_large``, the first ``value_bytes`` of the value, the original
        headers that fit in ``header_bytes``, and the original's reason, size and SHA-256 (a cut letter is cut
        further and keeps what it says of the original)."""
        if self.original is not None:  # cut again, smaller
            return replace(self, value=self.value[:value_bytes], headers=_fitting(self.headers, header_bytes))
        size = len(self.value)
        detail = (f"the dead letter ({size} bytes) was too large for the dead-letter sink: its value is cut to its "
                  f"first bytes, ragmon.original.* hold the original's reason, size and SHA-256 (rejected as "
                  f"{self.reason}: {self.detail})")
        return replace(self, value=self.value[:value_bytes], reason="too_large", detail=detail,
                       headers=_fitting(self.headers, header_bytes),
                       original=(self.reason, size, hashlib.sha256(self.value).hexdigest()))


def _fitting(headers: tuple[tuple[str, bytes], ...], budget: int) -> tuple[tuple[str, bytes], ...]:
    """The headers, in order, that fit in ``budget`` bytes (each whole or not at all; never a ``ragmon.`` one)."""
    kept = []
    for k, v in headers:
        size = len(k.encode("utf-8", "replace")) + len(v)
        if size <= budget and not k.startswith("ragmon."):
            kept.append((k, v))
            budget -= size
    return tuple(kept)


class DeadLetterSink(Protocol):
    """Where dead letters go.

    ``send`` blocks until every letter is acknowledged and returns what was delivered, in order: each letter, or
    the cut form of one too large for the sink (see the module docstring). Otherwise it raises
    ``RetryableSourceError`` (transient) or ``SourceError`` (permanent until someone fixes the sink); either way
    nothing may be assumed sent, and sending again may duplicate some letters: dead letters are at-least-once,
    with no dedup. A letter the sink refuses never makes ``send`` fail. Sending nothing is a no-op. ``close``
    delivers what was sent, may be called twice, and after it ``send`` raises ``SourceError``. Not thread-safe.
    """

    def send(self, letters: Sequence[DeadLetter]) -> list[DeadLetter]: ...

    def close(self) -> None: ...


class KafkaDeadLetterSink:
    """Produces dead letters to ``kafka.dead_letter_topic`` with acks=all, keyed by source partition."""

    def __init__(self, settings: KafkaSettings, *, timeout_seconds: float = 30.0):
        from kafka import KafkaProducer
        from kafka import errors as e

        self._settings = settings
        self._topic = settings.dead_letter_topic
        self._max_bytes = settings.dead_letter_max_message_bytes
        self._timeout = timeout_seconds
        self._kafka_error = e.KafkaError
        self._refusals = (e.MessageSizeTooLargeError, e.RecordListTooLargeError, e.InvalidRecordError,
                          e.CorruptRecordError)
        self._producer_class = KafkaProducer
        self._closed = False
        self._producer = self._new_producer()

    def _new_producer(self):  # type: ignore[no-untyped-def]
        try:
            return self._producer_class(**producer_options(self._settings, client_id="ragmon-ingest-dlq"))
        except self._kafka_error as exc:
            raise SourceError(
                f"cannot create the dead-letter producer for {self._settings.bootstrap_servers} ({exc}); check "
                "kafka.bootstrap_servers and that the broker is up"
            ) from None

    def send(self, letters: Sequence[DeadLetter]) -> list[DeadLetter]:
        if not letters:
            return []
        if self._closed:
            raise SourceError(f"the dead-letter producer for {self._topic} is closed")
        out = [d if d.size_bytes() <= self._max_bytes else d.cut_to() for d in letters]
        refused = self._produce(out, range(len(out)))
        for shrink in (DeadLetter.cut_to, lambda d: d.cut_to(0, 0)):  # the first bytes; then no value, no headers
            if not refused:
                return out
            for i in refused:
                out[i] = shrink(out[i])
            log.warning("%d dead letter(s) refused by %s as too large or invalid: producing them cut (%d bytes "
                        "of value)", len(refused), self._topic, len(out[refused[0]].value))
            refused = self._produce(out, refused)
        if refused:
            raise SourceError(f"{self._topic} refuses even a dead letter without its value "
                              f"({out[refused[0]].size_bytes()} "
                              "bytes): check the topic's max.message.bytes and configuration")
        return out

    def _produce(self, letters: list[DeadLetter], which: Sequence[int]) -> list[int]:
        """Send ``letters[i]`` for each ``i`` in ``which``; return those refused as the letter's own fault."""
        refused: list[int] = []
        futures = []
        try:
            for i in which:
                d = letters[i]
                try:
                    futures.append((i, self._producer.send(self._topic, value=d.value, key=d.kafka_key(),
                                                           headers=d.kafka_headers())))
                except self._refusals:  # checked by the client before sending: over max_request_size
                    refused.append(i)
            try:
                self._producer.flush(timeout=self._timeout)
            except self._kafka_error:  # e.g. "Future not done" while kafka-python splits a refused batch: the
                pass                   # futures of the letters below say what happened to each
            for i, f in futures:
                try:
                    f.get(timeout=self._timeout)
                except self._refusals:
                    refused.append(i)
        except (self._kafka_error, TimeoutError) as exc:
            raise self._failed(exc, len(which)) from None
        return sorted(refused)

    def _failed(self, exc: Exception, n: int) -> SourceError:
        what = f"producing {n} dead letter(s) to {self._topic} failed: {type(exc).__name__}: {exc}"
        if isinstance(exc, TimeoutError) or getattr(exc, "retriable", False):
            return RetryableSourceError(what)
        # not the letter's fault and not transient (authorization, an unknown error): the producer may be left
        # unusable (kafka-python keeps some errors as fatal), so the next attempt gets a new one
        log.error("%s; recreating the producer, retrying at the longest backoff", what)
        try:
            self._producer.close(timeout=0)
        except Exception as close_exc:  # noqa: BLE001 - the old producer is dropped either way
            log.debug("closing the failed dead-letter producer: %s", close_exc)
        self._producer = self._new_producer()
        return SourceError(what)

    def close(self) -> None:
        self._closed = True
        try:
            self._producer.close(timeout=5)
        except Exception as exc:  # noqa: BLE001 - best effort
            log.warning("closing the dead-letter producer failed: %s", exc)


@dataclass
class InMemoryDeadLetterSink:
    """Test double: keeps letters in a list; ``fail_next`` makes that many ``send`` calls fail (nothing sent);
    a letter over ``max_message_bytes`` is kept cut, as the Kafka sink produces it."""

    letters: list[DeadLetter] = field(default_factory=list)
    fail_next: int = 0
    calls: int = 0
    closed: bool = False
    max_message_bytes: int | None = None

    def send(self, letters: Sequence[DeadLetter]) -> list[DeadLetter]:
        if not letters:
            return []
        if self.closed:
            raise SourceError("the in-memory dead-letter sink is closed")
        self.calls += 1
        if self.fail_next > 0:
            self.fail_next -= 1
            raise RetryableSourceError("in-memory dead-letter failure (test)")
        limit = self.max_message_bytes
        out = [d if limit is None or d.size_bytes() <= limit else d.cut_to() for d in letters]
        self.letters.extend(out)
        return out

    def close(self) -> None:
        self.closed = True
