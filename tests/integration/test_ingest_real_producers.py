"""Ingest fed the way real producers feed it, against the real broker and chDB: nothing lost, no stall.

Producers here batch with ``linger_ms``, key by query id, compress with every codec Kafka has, send traces of
2–6 KB with 10–50 chunks, and put malformed records in the middle of their batches (``tests/support/producers.py``).
Each test below failed on the code before issue 17: a record with a non-UTF-8 header key cost its batch
neighbours; a dead letter over the broker's limit stalled every partition; snappy and zstd topics could not be
read and ingest spun without stopping.
"""

from __future__ import annotations

import hashlib
import json
import random
from typing import Any

import pytest

from tests.integration.ingest_support import (
    Running,
    committed,
    kafka_settings,
    read_topic,
    stored_ids,
    wait_for,
)
from tests.support.producers import CODECS, realistic_stream, realistic_trace, real_producer, send_all

pytestmark = pytest.mark.kafka


class _UndecodableKey(str):
    """A header key whose wire bytes are not UTF-8 (kafka-python's producer writes what encode() returns)."""

    def encode(self, *args: Any, **kwargs: Any) -> bytes:
        return b"\xff\xfe-key"


def test_valid_traces_batched_with_an_unreadable_record_are_all_stored(kafka_bootstrap, new_topic, store):
    # defect 1: five traces in one producer batch, the second with a header key that is not UTF-8; the client
    # used to fail on that record and every later one of the batch was dead-lettered with an empty value
    topic = new_topic(1)
    group = f"g-{topic}"
    rng = random.Random(1)
    traces = [realistic_trace(i, rng) for i in range(5)]
    producer = real_producer(kafka_bootstrap, linger_ms=500)
    messages = [(t["query_id"].encode(), json.dumps(t).encode(), [("app", b"tests")]) for t in traces]
    messages[1] = (messages[1][0], messages[1][1], [("app", b"tests"), (_UndecodableKey("k"), b"v")])
    send_all(producer, topic, messages)
    producer.close()
    run = Running(store, kafka_settings(kafka_bootstrap, topic, group))
    try:
        wait_for(lambda: run.pipeline.idle() and committed(kafka_bootstrap, group) == {0: 5}, 60, "all handled")
    finally:
        run.close()
    assert sorted(stored_ids(store)) == sorted(t["trace_id"] for i, t in enumerate(traces) if i != 1)
    [letter] = read_topic(kafka_bootstrap, f"{topic}.dlq")
    headers = dict(letter.headers)
    assert headers["ragmon.reason"] == b"unreadable_record" and headers["ragmon.source.offset"] == b"1"
    assert b"not UTF-8" in headers["ragmon.detail"] and b"\\xff\\xfe-key" in headers["ragmon.detail"]
    assert letter.value == messages[1][1], "the record's value is kept"
    assert headers["app"] == b"tests" and headers["\\xff\\xfe-key"] == b"v", "its headers too, the bad key escaped"
