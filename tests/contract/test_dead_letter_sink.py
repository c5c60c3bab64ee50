"""One contract suite for ``DeadLetterSink``, run against the in-memory double and against real Kafka.

What the ingest loop and a reader of the dead-letter topic rely on: ``send`` returns once every letter is
acknowledged; each letter keeps its original bytes, carries its reason, detail and source position as
``ragmon.*`` headers beside the message's own headers (a producer's own ``ragmon.*`` headers never pass for
ragmon's); the letters of one source partition stay in order; there is no deduplication (a resend produces
duplicates: dead letters are at-least-once); sending nothing is a no-op; a failed send raises
``RetryableSourceError`` (never a client library's exception) and the sink keeps working (not yet true of the
Kafka sink after the broker refused a letter as too large: marked xfail below); ``close`` delivers what was
sent, may be called twice, and a send after it raises ``SourceError``.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from kafka import KafkaConsumer

from ragmon.config import KafkaSettings
from ragmon.errors import RetryableSourceError, SourceError
from ragmon.ingest.dead_letter import (
    MAX_DETAIL_BYTES,
    DeadLetter,
    InMemoryDeadLetterSink,
    KafkaDeadLetterSink,
)

#: read back: (key, value, headers) as a consumer of the dead-letter topic sees them
Record = tuple[bytes, bytes, list[tuple[str, bytes]]]

#: the largest message the Kafka backend's dead-letter topic accepts (a broker-side limit to make a send fail)
TOPIC_MAX_MESSAGE_BYTES = 4_096


class InMemoryBackend:
    def __init__(self) -> None:
        self.sink = InMemoryDeadLetterSink()

    def read(self, n: int) -> list[Record]:
        return [(d.kafka_key(), d.value, d.kafka_headers()) for d in self.sink.letters]

    def refuse_next_send(self) -> list[DeadLetter]:
        """Make the next send fail; return letters to send for that."""
        self.sink.fail_next = 1
        return [letter(0)]


class KafkaBackend:
    def __init__(self, bootstrap: str, topic: str) -> None:
        self.bootstrap, self.topic = bootstrap, topic
        self.sink = KafkaDeadLetterSink(KafkaSettings(bootstrap_servers=bootstrap, dead_letter_topic=topic),
                                        timeout_seconds=15)

    def read(self, n: int, timeout: float = 20.0) -> list[Record]:
        consumer = KafkaConsumer(self.topic, bootstrap_servers=self.bootstrap, auto_offset_reset="earliest",
                                 enable_auto_commit=False)
        got: list[Record] = []
        deadline = time.monotonic() + timeout
        try:
            while time.monotonic() < deadline and len(got) < n:
                for records in consumer.poll(timeout_ms=200).values():
                    got.extend((r.key, r.value, list(r.headers)) for r in records)
            if len(got) == n:  # and nothing more arrives
                for records in consumer.poll(timeout_ms=1000).values():
                    got.extend((r.key, r.value, list(r.headers)) for r in records)
        finally:
            consumer.close()
        return got

    def refuse_next_send(self) -> list[DeadLetter]:
        """A letter larger than the topic's max.message.bytes: the broker refuses it."""
        return [letter(0, value=b"x" * (2 * TOPIC_MAX_MESSAGE_BYTES))]


@pytest.fixture(params=["in_memory", "kafka"])
def backend(request: pytest.FixtureRequest) -> Iterator[Any]:
    if request.param == "in_memory":
        b: Any = InMemoryBackend()
    else:
        topic = request.getfixturevalue("new_topic")(1, configs={"max.message.bytes": str(TOPIC_MAX_MESSAGE_BYTES)})
        b = KafkaBackend(request.getfixturevalue("kafka_bootstrap"), topic)
    try:
        yield b
    finally:
        b.sink.close()


def letter(offset: int, *, partition: int = 0, value: bytes | None = None, reason: str = "invalid_json",
           detail: str = "Expected `float`, got `str` - at `$.retrieved[0].score`",
           headers: tuple[tuple[str, bytes], ...] = ()) -> DeadLetter:
    return DeadLetter("rag.traces", partition, offset, value if value is not None else f"{{bad {offset}".encode(),
                      reason, detail, headers)


def test_a_letter_keeps_its_bytes_and_carries_reason_detail_source_and_the_original_headers(backend):
    original = letter(41, partition=3, value=b"\x00\xff not json", reason="schema",
                      headers=(("producer", b"app-1"), ("ragmon.reason", b"spoofed")))
    backend.sink.send([original])
    [(key, value, headers)] = backend.read(1)
    assert value == b"\x00\xff not json" and key == b"rag.traces/3"
    assert headers == [("ragmon.reason", b"schema"), ("ragmon.detail", original.detail.encode()),
                       ("ragmon.source.topic", b"rag.traces"), ("ragmon.source.partition", b"3"),
                       ("ragmon.source.offset", b"41"), ("producer", b"app-1")]


def test_a_long_detail_is_cut_to_its_limit_at_a_character_boundary(backend):
    backend.sink.send([letter(0, detail="é" * MAX_DETAIL_BYTES)])
    [(_, _, headers)] = backend.read(1)
    detail = dict(headers)["ragmon.detail"]
    assert len(detail) <= MAX_DETAIL_BYTES and detail.decode("utf-8") == "é" * (MAX_DETAIL_BYTES // 2)


def test_letters_of_a_source_partition_stay_in_order(backend):
    backend.sink.send([letter(i) for i in range(5)])
    backend.sink.send([letter(i) for i in range(5, 8)])
    assert [dict(h)["ragmon.source.offset"] for _, _, h in backend.read(8)] == [str(i).encode() for i in range(8)]


def test_there_is_no_deduplication_a_resend_is_delivered_again(backend):
    backend.sink.send([letter(7)])
    backend.sink.send([letter(7)])  # a retry after an ambiguous failure
    assert [v for _, v, _ in backend.read(2)] == [b"{bad 7", b"{bad 7"]


def test_sending_nothing_is_a_no_op(backend):
    backend.sink.send([])
    backend.sink.send([letter(1)])
    assert [v for _, v, _ in backend.read(1)] == [b"{bad 1"]


def test_a_failed_send_raises_retryable_source_error(backend):
    backend.sink.send([letter(1)])
    with pytest.raises(RetryableSourceError):
        backend.sink.send(backend.refuse_next_send())
    assert [v for _, v, _ in backend.read(1)] == [b"{bad 1"]


def test_the_sink_keeps_working_after_a_refused_letter(backend, request):
    if isinstance(backend, KafkaBackend):
        # a known gap (found by this suite): kafka-python 3's idempotent producer (its default) treats the
        # broker's MESSAGE_TOO_LARGE as fatal and refuses every later send, so one dead letter larger than the
        # dead-letter topic's max.message.bytes stalls ingest until someone intervenes
        request.applymarker(pytest.mark.xfail(strict=True, raises=RetryableSourceError,
                                              reason="the producer stays failed after MESSAGE_TOO_LARGE"))
    with pytest.raises(RetryableSourceError):
        backend.sink.send(backend.refuse_next_send())
    backend.sink.send([letter(2)])
    assert [v for _, v, _ in backend.read(1)] == [b"{bad 2"]


def test_close_delivers_what_was_sent_may_be_repeated_and_ends_sending(backend):
    backend.sink.send([letter(1), letter(2)])
    backend.sink.close()
    backend.sink.close()
    with pytest.raises(SourceError):
        backend.sink.send([letter(3)])
    assert [v for _, v, _ in backend.read(2)] == [b"{bad 1", b"{bad 2"]
