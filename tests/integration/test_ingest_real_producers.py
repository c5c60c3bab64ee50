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
import subprocess
import sys
from typing import Any

import pytest
from kafka import KafkaAdminClient

from tests.integration.ingest_support import (
    ROOT,
    Running,
    committed,
    count_in_subprocess,
    exactly_once_problems,
    ingest_cmd,
    ingest_env,
    kafka_settings,
    read_topic,
    stored_ids,
    wait_for,
)
from tests.support.producers import CODECS, real_producer, realistic_stream, realistic_trace, send_all

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


def test_every_codec_batched_keyed_with_malformed_records_mid_batch_is_read(kafka_bootstrap, new_topic, store):
    # defect 4: the OpenTelemetry Collector and many producers compress; snappy and zstd could not be read
    topic = new_topic(3)
    group = f"g-{topic}"
    streams = {codec: realistic_stream(120, seed=i, malformed_every=20) for i, codec in enumerate(CODECS)}
    for codec, stream in streams.items():
        producer = real_producer(kafka_bootstrap, compression=codec, linger_ms=200)
        send_all(producer, topic, stream.messages)
        producer.close()
    total = sum(len(s.messages) for s in streams.values())
    run = Running(store, kafka_settings(kafka_bootstrap, topic, group))
    try:
        wait_for(lambda: run.pipeline.idle() and sum(committed(kafka_bootstrap, group).values()) == total, 90,
                 "every message handled")
    finally:
        run.close()
    stored = set(stored_ids(store))
    missing = {codec: len(s.valid_ids - stored) for codec, s in streams.items() if s.valid_ids - stored}
    assert not missing, f"traces not stored, by codec: {missing}"
    assert len(stored) == sum(len(s.valid_ids) for s in streams.values())
    letters = read_topic(kafka_bootstrap, f"{topic}.dlq")
    expected = sorted(r for s in streams.values() for r in s.reasons)
    assert sorted(dict(m.headers)["ragmon.reason"].decode() for m in letters) == expected
    sizes = [len(value) for s in streams.values() for _, value, _ in s.messages]
    assert max(sizes) > 4_000 and sorted(sizes)[len(sizes) // 2] > 2_000, "the traces are of a realistic size"


def test_a_codec_that_cannot_be_read_stops_ingest_loudly_with_its_exit_code(kafka_bootstrap, new_topic, tmp_path):
    # defect 4: with a codec's library missing, ingest logged one error, then spun at a full core inside the
    # Kafka client, /healthz went red and SIGTERM was not honoured; now it stops by itself, exit code 5
    topic = new_topic(1)
    group = f"g-{topic}"
    rng = random.Random(3)
    plain = [realistic_trace(i, rng) for i in range(3)]
    packed = [realistic_trace(10 + i, rng) for i in range(3)]
    for codec, traces in ((None, plain), ("zstd", packed)):
        producer = real_producer(kafka_bootstrap, compression=codec)
        send_all(producer, topic, [(t["query_id"].encode(), json.dumps(t).encode(), []) for t in traces])
        producer.close()
    # the zstd library hidden from this process only, as in an installation without it
    cmd = ingest_cmd(topic, group, kafka_bootstrap)
    cmd[2] = "import sys; sys.modules['zstandard'] = None; " + cmd[2]
    proc = subprocess.run(cmd, env=ingest_env(tmp_path / "chdb"), capture_output=True, text=True, timeout=120,
                          cwd=ROOT)
    assert proc.returncode == 5, proc.stderr[-3000:]
    [line] = [x for x in proc.stderr.splitlines() if x.startswith("error: ")]
    assert "zstd" in line and "zstandard" in line, line
    assert committed(kafka_bootstrap, group) == {0: 3}, "what was read before the batch it cannot read is committed"
    assert exactly_once_problems(count_in_subprocess(tmp_path / "chdb"), {t["trace_id"] for t in plain}) == []


def test_dead_letters_too_large_for_the_dead_letter_topic_are_cut_and_never_stall(kafka_bootstrap, new_topic, store):
    # defect 2: a big invalid message the source topic accepted makes a dead letter over the broker's limit; the
    # produce failed for ever (kafka-python's idempotent producer took MESSAGE_TOO_LARGE as fatal) and nothing was
    # committed again. Three kinds: over the dead-letter topic's own limit (refused by the broker), over
    # kafka.dead_letter_max_message_bytes (cut before sending), over ingest.max_message_bytes (too_large)
    topic = new_topic(2, configs={"max.message.bytes": "4000000"})
    dlq = f"{topic}.dlq"
    admin = KafkaAdminClient(bootstrap_servers=kafka_bootstrap)
    admin.create_topics({dlq: {"num_partitions": 1, "replication_factor": 1,
                               "configs": {"max.message.bytes": "200000"}}}, wait_for_metadata=True)
    big = {"refused": b'{"trace_id": "' + b"r" * 300_000,               # invalid_json, the broker refuses it
           "over_setting": b'{"trace_id": "' + b"s" * 1_040_000,        # invalid_json, over the setting
           "over_max": json.dumps(realistic_trace(0, random.Random(0), question="q" * 1_500_000)).encode()}
    stream = realistic_stream(300, seed=5, malformed_every=50)
    messages = list(stream.messages)
    for i, value in enumerate(big.values()):  # in the middle of the batches
        messages.insert(60 + 90 * i, (b"big", value, [("app", b"tests"), ("trace", b"t" * 2_000)]))
    producer = real_producer(kafka_bootstrap, linger_ms=200, max_request_size=4_000_000)
    send_all(producer, topic, messages)
    producer.close()
    try:
        run = Running(store, kafka_settings(kafka_bootstrap, topic, f"g-{topic}"))
        try:
            wait_for(lambda: run.pipeline.idle()
                     and sum(committed(kafka_bootstrap, f"g-{topic}").values()) == len(messages), 90,
                     "every message handled and committed")
        finally:
            run.close()
        assert set(stored_ids(store)) == stream.valid_ids
        records = read_topic(kafka_bootstrap, dlq)
        whole = [m for m in records if "ragmon.original.sha256" not in dict(m.headers)]
        assert sorted(dict(m.headers)["ragmon.reason"].decode() for m in whole) == sorted(stream.reasons)
        letters = {dict(m.headers)["ragmon.original.sha256"].decode(): m for m in records if m not in whole}
        assert len(letters) == len(big), "each big one cut"
        for name, value in big.items():
            letter = letters[hashlib.sha256(value).hexdigest()]
            h = dict(letter.headers)
            assert h["ragmon.reason"] == b"too_large", name
            assert h["ragmon.original.bytes"] == str(len(value)).encode(), name
            assert h["ragmon.original.reason"] == (b"too_large" if name == "over_max" else b"invalid_json"), name
            assert value.startswith(letter.value) and 0 < len(letter.value) < 10_000, name
            assert h["app"] == b"tests" and "trace" not in h, "original headers kept while they fit"
        assert run.metric("ragmon_ingest_dead_letters_cut_total") == 3
        assert run.metric("ragmon_ingest_dead_letters_total", {"reason": "too_large"}) == 3
    finally:
        admin.delete_topics([dlq])
        admin.close()


def test_traces_at_the_ends_of_the_accepted_range_are_kept_and_found_the_rest_rejected(kafka_bootstrap, new_topic,
                                                                                        store):
    # defect 3: a trace dated between 2106 and 2299 was accepted and committed, then deleted within seconds: the
    # table's TTL computed in DateTime, which wraps after 2106-02-07 06:28:15
    topic = new_topic(1)
    group = f"g-{topic}"
    rng = random.Random(9)
    stamps = {"now": None, "last": "2106-02-07T06:28:15.999Z", "late": "2105-12-31T12:00:00Z",
              "after": "2106-02-07T06:28:16Z", "2150": "2150-01-01T00:00:00Z", "2299": "2299-12-31T23:59:59.999Z"}
    traces = [realistic_trace(i, rng, trace_id=name, **({"timestamp": ts} if ts else {}))
              for i, (name, ts) in enumerate(stamps.items())]
    producer = real_producer(kafka_bootstrap)
    send_all(producer, topic, [(t["query_id"].encode(), json.dumps(t).encode(), []) for t in traces])
    producer.close()
    run = Running(store, kafka_settings(kafka_bootstrap, topic, group))
    try:
        wait_for(lambda: run.pipeline.idle() and committed(kafka_bootstrap, group) == {0: len(traces)}, 60,
                 "all handled")
    finally:
        run.close()
    table = store.table("traces")
    store.command(f"OPTIMIZE TABLE {table} FINAL")  # a merge applies the TTL: what it would delete goes now
    assert sorted(stored_ids(store)) == ["last", "late", "now"]
    found = store.query(f"SELECT trace_id FROM {table} FINAL WHERE ts >= {{since:DateTime64(3, 'UTC')}} ORDER BY ts",
                        parameters={"since": "2105-06-01 00:00:00"}).result_rows
    assert [r[0] for r in found] == ["late", "last"], "found by a time-range query (the sort key's toDate)"
    letters = {dict(m.headers)["ragmon.source.offset"]: dict(m.headers)
               for m in read_topic(kafka_bootstrap, f"{topic}.dlq")}
    assert sorted(letters) == [b"3", b"4", b"5"]
    assert all(h["ragmon.reason"] == b"invalid_value" and b"2106-02-07T06:28:15.999Z" in h["ragmon.detail"]
               for h in letters.values())


def test_a_trace_id_sent_again_with_other_content_replaces_it_only_within_its_key(kafka_bootstrap, new_topic, store):
    # decided (docs/trace-contract.md): a trace id names one trace; sent again, the later-ingested version wins
    # under FINAL when retriever, variant, category and day are the same (the table's key), and both are kept
    # when one of them differs: ragmon does not look up earlier rows per message
    topic = new_topic(1)
    group = f"g-{topic}"
    rng = random.Random(4)
    first = realistic_trace(0, rng, trace_id="same", category="billing", answer="first answer")
    again = dict(first, answer="second answer")
    moved = dict(first, category="privacy", answer="third answer")
    run = Running(store, kafka_settings(kafka_bootstrap, topic, group))
    try:
        for n, trace in enumerate((first, again, moved), start=1):
            producer = real_producer(kafka_bootstrap)
            send_all(producer, topic, [(b"k", json.dumps(trace).encode(), [])])
            producer.close()
            wait_for(lambda n=n: run.pipeline.idle() and committed(kafka_bootstrap, group) == {0: n}, 60, "stored")
    finally:
        run.close()
    rows = store.query(f"SELECT category, answer FROM {store.table('traces')} FINAL WHERE trace_id = 'same' "
                       "ORDER BY category").result_rows
    assert [tuple(r) for r in rows] == [("billing", "second answer"), ("privacy", "third answer")]


def test_ragmon_run_stops_every_role_when_ingest_can_never_read_its_topic(kafka_bootstrap, new_topic, tmp_path):
    # the same unreadable codec under `ragmon run`: the ingest loop ends for good, and the process must not go on
    # half alive (drift still running, /healthz red, nothing ingested): every role stops and the exit code is 5
    topic = new_topic(1)
    producer = real_producer(kafka_bootstrap, compression="zstd")
    send_all(producer, topic, [(b"q", json.dumps(realistic_trace(1, random.Random(4))).encode(), [])])
    producer.close()
    code = "import sys; sys.modules['zstandard'] = None; from ragmon.cli.app import main; main()"
    env = dict(ingest_env(tmp_path / "chdb"), RAGMON_KAFKA__BOOTSTRAP_SERVERS=kafka_bootstrap,
               RAGMON_KAFKA__TOPIC=topic, RAGMON_KAFKA__GROUP_ID=f"g-{topic}",
               RAGMON_KAFKA__DEAD_LETTER_TOPIC=f"{topic}.dlq", RAGMON_ROLES__SCORE="false",
               RAGMON_ROLES__REVIEW="false", RAGMON_ROLES__OTLP="false", RAGMON_ROLES__SHADOW="false")
    proc = subprocess.run([sys.executable, "-c", code, "run", "--port", "0"], env=env, capture_output=True,
                          text=True, timeout=180, cwd=ROOT)
    assert proc.returncode == 5, proc.stderr[-3000:]
    assert "ragmon running roles: ingest, drift" in proc.stdout
    [line] = [x for x in proc.stderr.splitlines() if x.startswith("error: ")]
    assert line.startswith("error: ingest stopped:") and "zstandard" in line, line
