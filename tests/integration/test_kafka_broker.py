"""The real Kafka broker end to end with kafka-python: topic, produce, group consume, commit, committed offsets.

This is the proof that scripts/kafka-broker gives the suite a working broker (KRaft, group coordinator,
offsets topic); it owns no ragmon code.
"""

from __future__ import annotations

import time
from collections import Counter

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition

pytestmark = pytest.mark.kafka

PARTITIONS = 3
PER_PARTITION = (5, 7, 11)  # different counts, so a partition mix-up cannot pass


def test_produce_consume_commit_and_read_committed_offsets(kafka_bootstrap, new_topic):
    topic = new_topic(partitions=PARTITIONS)

    producer = KafkaProducer(bootstrap_servers=kafka_bootstrap, acks="all")
    try:
        for partition, count in enumerate(PER_PARTITION):
            for i in range(count):
                producer.send(topic, value=f"p{partition}-m{i}".encode(), key=b"k", partition=partition)
        producer.flush(timeout=30)
    finally:
        producer.close()

    group = f"{topic}-group"
    consumer = KafkaConsumer(topic, bootstrap_servers=kafka_bootstrap, group_id=group,
                             enable_auto_commit=False, auto_offset_reset="earliest",
                             consumer_timeout_ms=1000)
    seen: Counter[int] = Counter()
    values: set[bytes] = set()
    try:
        deadline = time.monotonic() + 60
        while sum(seen.values()) < sum(PER_PARTITION) and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=1000).values():
                for record in records:
                    seen[record.partition] += 1
                    values.add(record.value)
        consumer.commit()
    finally:
        consumer.close()

    assert dict(seen) == dict(enumerate(PER_PARTITION))
    assert values == {f"p{p}-m{i}".encode() for p, n in enumerate(PER_PARTITION) for i in range(n)}

    admin = KafkaAdminClient(bootstrap_servers=kafka_bootstrap, request_timeout_ms=15000)
    try:
        committed = admin.list_group_offsets({group: None})[group]
    finally:
        admin.close()
    assert {tp: meta.offset for tp, meta in committed.items()} == {
        TopicPartition(topic, p): n for p, n in enumerate(PER_PARTITION)
    }
