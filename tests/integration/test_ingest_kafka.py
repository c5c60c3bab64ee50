"""Ingest against the real Kafka broker and the real chDB engine: nothing lost, nothing doubled.

The kill -9 tests run ``ragmon ingest`` as a subprocess with its own chDB directory and count with FINAL from a
fresh subprocess (helpers shared with test_ingest_broker_restart.py are in ingest_support.py). The other tests
run the pipeline in a thread of this process against the session's chDB engine (the ``store`` fixture) so that
they can break the store for real (DETACH TABLE) and watch the loop.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, OffsetAndMetadata, TopicPartition
from kafka.errors import KafkaError, NoError

from ragmon.stream.source import KafkaTraceSource
from tests.conftest import make_trace
from tests.integration.ingest_support import (
    ROOT,
    Running,
    committed,
    count_in_subprocess,
    exactly_once_problems,
    ingest_cmd,
    ingest_env,
    kafka_settings,
    produce,
    read_topic,
    stored_ids,
    traces,
    wait_for,
)

pytestmark = pytest.mark.kafka


# -- subprocess helpers (kill -9) -----------------------------------------------------------------------------

def kill_at(cmd: list[str], env: dict[str, str], point: str, skip: int, jitter: float, log: Path) -> str:
    """Start ingest, SIGKILL it when the ``skip``-th+1 announcement of ``point`` appears; return its stderr."""
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    seen, lines = 0, []
    deadline = time.monotonic() + 90
    assert proc.stderr is not None
    try:
        for line in proc.stderr:
            lines.append(line)
            if line.startswith(f"ragmon-fault: {point}"):
                if seen == skip:
                    time.sleep(jitter)
                    proc.send_signal(signal.SIGKILL)
                    break
                seen += 1
            if time.monotonic() > deadline:
                break
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(30)
    text = "".join(lines)
    log.write_text(text)
    assert proc.returncode == -signal.SIGKILL, (f"ingest was not killed at {point} "
                                                f"(rc={proc.returncode}):\n{text[-3000:]}")
    return text


# -- (a) kill -9 in each crash window, then restart ----------------------------------------------------------

def test_kill_9_in_every_crash_window_then_restart_stores_each_trace_exactly_once(kafka_bootstrap, new_topic,
                                                                                   tmp_path):
    topic = new_topic(3)
    group = f"g-{topic}"
    values, expected = traces("k9", 3000)
    values += [b"{truncated", json.dumps({"trace_id": "x"}).encode()]  # two dead letters among them
    produce(kafka_bootstrap, topic, values)
    chdb = tmp_path / "chdb"
    cmd = ingest_cmd(topic, group, kafka_bootstrap)
    rng = random.Random(int(os.environ.get("RAGMON_TEST_SEED", "7")))
    faults = "before_insert=3,during_insert=0,after_insert=3"
    logs = {}
    for point in ("before_insert", "during_insert", "after_insert"):
        jitter = rng.uniform(0, 0.03) if point == "during_insert" else 0.0
        logs[point] = kill_at(cmd, ingest_env(chdb, faults), point, rng.randint(0, 1), jitter,
                              tmp_path / f"{point}.log")
        assert f"ragmon-fault: {point}" in logs[point]  # the fault visibly happened
    after_kills = count_in_subprocess(chdb)
    assert len(set(after_kills["ids"])) < len(expected), "the kills must interrupt ingestion before the end"
    # the after_insert kill left an acknowledged but uncommitted batch: stored traces at or past the committed
    # offsets, which the restart reads and writes again
    before = committed(kafka_bootstrap, group)
    stored_past_commit = [(p, o) for p, o in after_kills["positions"] if o >= before.get(p, 0)]
    assert stored_past_commit, f"no stored trace lies past the committed offsets {before}"
    final = subprocess.run(cmd + ["--exit-when-idle", "2"], env=ingest_env(chdb), capture_output=True, text=True,
                           timeout=300, cwd=ROOT)
    assert final.returncode == 0, final.stderr[-3000:]
    assert committed(kafka_bootstrap, group) == {0: 1001, 1: 1001, 2: 1000}, "the restart read to the end"
    result = count_in_subprocess(chdb)
    assert exactly_once_problems(result, expected) == []
    assert result["final"] == len(expected)
    # (the traces stored past the commit were read and written again, and still count once above: by the
    # insert's dedup token, or under FINAL)
    print(f"kill -9 test: {result['raw']} rows on disk, {result['final']} under FINAL, {len(expected)} produced")


def test_negative_control_the_check_detects_loss_when_offsets_run_ahead_of_the_store(kafka_bootstrap, new_topic,
                                                                                      tmp_path):
    """A consumer that commits before writing (simulated: kill before the insert, then commit the ends) loses
    traces, and the same check used above reports it. Proves the exactly-once check can fail."""
    topic = new_topic(3)
    group = f"g-{topic}"
    values, expected = traces("nc", 1500)
    produce(kafka_bootstrap, topic, values)
    chdb = tmp_path / "chdb"
    cmd = ingest_cmd(topic, group, kafka_bootstrap)
    kill_at(cmd, ingest_env(chdb, "before_insert=5"), "before_insert", 0, 0.0, tmp_path / "nc.log")
    consumer = KafkaConsumer(bootstrap_servers=kafka_bootstrap)
    parts = [TopicPartition(topic, p) for p in range(3)]
    ends = consumer.end_offsets(parts)
    consumer.close()
    admin = KafkaAdminClient(bootstrap_servers=kafka_bootstrap)
    deadline = time.monotonic() + 30

    def commit_ends() -> bool:  # at-most-once: the offsets run ahead of what the store has
        try:
            errors = admin.alter_group_offsets(group, {tp: OffsetAndMetadata(ends[tp], "", -1) for tp in parts})
        except KafkaError:
            errors = {"": KafkaError}
        # the killed member stays in the group until its session times out; until then the broker refuses
        return all(e is NoError for e in errors.values()) or time.monotonic() > deadline

    wait_for(commit_ends, 40, "the group to empty so its offsets can be moved")
    admin.close()
    assert committed(kafka_bootstrap, group) == {tp.partition: ends[tp] for tp in parts}
    final = subprocess.run(cmd + ["--exit-when-idle", "2"], env=ingest_env(chdb), capture_output=True, text=True,
                           timeout=300, cwd=ROOT)
    assert final.returncode == 0, final.stderr[-3000:]
    problems = exactly_once_problems(count_in_subprocess(chdb), expected)
    assert problems and "missing" in problems[0], problems


# -- (b) the store failing for a while ------------------------------------------------------------------------

def test_store_outage_pauses_consumption_commits_nothing_and_recovers_exactly_once(kafka_bootstrap, new_topic,
                                                                                    store):
    topic = new_topic(3)
    group = f"g-{topic}"
    first, ids1 = traces("so1", 600)
    produce(kafka_bootstrap, topic, first)
    run = Running(store, kafka_settings(kafka_bootstrap, topic, group))
    try:
        wait_for(lambda: run.pipeline.idle() and run.metric("ragmon_ingest_traces_stored_total") == 600, 60,
                 "the first 600 traces")
        before = committed(kafka_bootstrap, group)
        assert sum(before.values()) == 600
        store.command(f"DETACH TABLE {store.table('traces')}")  # the store fails for real: inserts error out
        second, ids2 = traces("so2", 900)
        produce(kafka_bootstrap, topic, second)
        wait_for(lambda: run.metric("ragmon_ingest_paused") == 1, 30, "consumption to pause")
        consumed = run.metric("ragmon_ingest_messages_consumed_total", {"topic": topic})
        wait_for(lambda: run.metric("ragmon_ingest_store_retries_total") >= 4, 30, "several retries")
        assert run.metric("ragmon_ingest_messages_consumed_total", {"topic": topic}) == consumed, \
            "nothing more is read while paused (memory bounded by one batch)"
        assert consumed - 600 <= 500 + 3 * 500, "at most one batch (plus one poll) was read ahead"
        assert committed(kafka_bootstrap, group) == before, "no commit while the store fails"
        store.command(f"ATTACH TABLE {store.table('traces')}")
        wait_for(lambda: run.pipeline.idle() and run.metric("ragmon_ingest_paused") == 0
                 and sum(committed(kafka_bootstrap, group).values()) == 1500, 60, "recovery")
    finally:
        run.close()
    ids = stored_ids(store)
    assert sorted(ids) == sorted(ids1 | ids2)


# -- (c) a rebalance while traffic flows ---------------------------------------------------------------------

def test_consumer_joining_and_leaving_during_production_stores_each_trace_once(kafka_bootstrap, new_topic, store):
    topic = new_topic(4)
    group = f"g-{topic}"
    ks = kafka_settings(kafka_bootstrap, topic, group)
    values, expected = traces("rb", 4000)
    producer_done = threading.Event()

    def slow_produce() -> None:
        producer = KafkaProducer(bootstrap_servers=kafka_bootstrap, linger_ms=5)
        for i, v in enumerate(values):
            if i == len(values) // 2:  # A may have caught up: the second half waits for B's join, so B gets work
                wait_for(lambda: a.pipeline.stats.revocations >= 1, 60, "consumer B to join (A revokes)")
            producer.send(topic, v, partition=i % 4)
            if i % 200 == 0:
                producer.flush()
                time.sleep(0.1)
        producer.flush()
        producer.close()
        producer_done.set()

    a = Running(store, ks, max_batch_rows=300)
    threading.Thread(target=slow_produce, daemon=True).start()
    wait_for(lambda: a.metric("ragmon_ingest_traces_stored_total") > 300, 60, "consumer A to store some traces")
    b = Running(store, ks, max_batch_rows=300)  # joins: A's partitions are revoked (flushed, committed), split
    wait_for(lambda: b.metric("ragmon_ingest_traces_stored_total") > 0, 60, "consumer B to get partitions")
    b.close()  # leaves: its partitions go back to A
    wait_for(producer_done.is_set, 120, "production to finish")
    wait_for(lambda: sum(committed(kafka_bootstrap, group).values()) == 4000 and a.pipeline.idle(), 90,
             "everything committed")
    a.close()
    ids = stored_ids(store)
    assert len(ids) == len(set(ids)) and set(ids) == expected
    assert a.metric("ragmon_ingest_traces_stored_total") + b.metric("ragmon_ingest_traces_stored_total") >= 4000
    assert a.pipeline.stats.revocations >= 2, "A gave up partitions when B joined and again when B left"
    assert b.pipeline.stats.revocations >= 1


# -- (d) dead letters beside valid neighbours -----------------------------------------------------------------

def test_dead_letters_carry_reason_headers_while_valid_neighbours_are_stored(kafka_bootstrap, new_topic, store):
    topic = new_topic(1)
    group = f"g-{topic}"
    valid, expected = traces("dl", 20)
    bad = [b"\xff\xfe not json", json.dumps({"trace_id": "x", "query_id": "q"}).encode(),
           json.dumps(make_trace(trace_id="nan", retrieved=[{"chunk_id": "c", "score": float("nan"), "rank": 1}]))
           .encode(), json.dumps(make_trace(trace_id="big", question="x" * 60_000)).encode()]
    reasons = ["invalid_json", "schema", "non_finite_score", "too_large"]
    stream = []
    for i, v in enumerate(valid):
        stream.append(v)
        if i % 5 == 0:
            stream.append(bad[i // 5])
    producer = KafkaProducer(bootstrap_servers=kafka_bootstrap)
    for v in stream:
        producer.send(topic, v, headers=[("producer", b"test")])
    producer.flush()
    producer.close()
    run = Running(store, kafka_settings(kafka_bootstrap, topic, group), max_message_bytes=50_000)
    try:
        wait_for(lambda: run.pipeline.idle() and sum(committed(kafka_bootstrap, group).values()) == len(stream),
                 60, "all messages handled")
    finally:
        run.close()
    assert set(stored_ids(store)) == expected
    consumer = KafkaConsumer(f"{topic}.dlq", bootstrap_servers=kafka_bootstrap, auto_offset_reset="earliest",
                             consumer_timeout_ms=5000)
    letters = list(consumer)
    consumer.close()
    assert len(letters) == 4
    for letter, reason, original in zip(letters, reasons, bad, strict=True):
        h = dict(letter.headers)
        assert h["ragmon.reason"].decode() == reason and h["ragmon.detail"]
        assert h["ragmon.source.topic"].decode() == topic and h["ragmon.source.partition"] == b"0"
        assert stream[int(h["ragmon.source.offset"])] == original == letter.value
        assert h["producer"] == b"test"
    for reason in reasons:
        assert run.metric("ragmon_ingest_dead_letters_total", {"reason": reason}) == 1


# -- (e) OTLP from the real OpenTelemetry SDK ------------------------------------------------------------------

def test_otlp_spans_from_the_real_sdk_split_across_messages_land_as_traces(kafka_bootstrap, new_topic, store):
    from tests.support.otel_spans import otlp_messages, rag_spans

    topic = new_topic(1)  # one partition per trace, as the Collector's partition_traces_by_id gives
    group = f"g-{topic}"
    proto_spans, json_spans, orphan_spans = rag_spans(40, prefix="p"), rag_spans(40, prefix="j"), rag_spans(1)
    messages = (otlp_messages(proto_spans, 4, "proto") + otlp_messages(json_spans, 5, "otlp_json")
                + otlp_messages(orphan_spans[:2], 2, "proto"))  # the last trace's root never arrives
    produce(kafka_bootstrap, topic, messages, partitions=1)
    run = Running(store, kafka_settings(kafka_bootstrap, topic, group), otlp_max_query_seconds=1.0)
    try:
        wait_for(lambda: run.pipeline.idle() and sum(committed(kafka_bootstrap, group).values()) == len(messages),
                 60, "all OTLP messages handled")
    finally:
        run.close()
    rows = store.query_rows(
        f"SELECT query_id, question, answer, retrieved_chunk_ids, retrieved_scores, model_name, tokens_prompt, "
        f"tokens_completion, latency_ms, attributes FROM {store.table('traces')} FINAL")
    assert sorted(r["query_id"] for r in rows) == sorted([f"p{i}" for i in range(40)] + [f"j{i}" for i in range(40)])
    j7 = next(r for r in rows if r["query_id"] == "j7")
    assert j7["question"] == "How do I reset my password? (j7)" and j7["answer"].startswith("Use the reset link")
    assert list(j7["retrieved_chunk_ids"]) == ["kb@c0", "kb@c1", "kb@c2"]
    assert list(j7["retrieved_scores"]) == [0.9, 0.8, 0.7]
    assert (j7["model_name"], j7["tokens_prompt"], j7["tokens_completion"]) == ("gen-1", 120, 24)
    assert j7["attributes"]["service.name"] == "rag-app" and j7["attributes"]["otel.span_count"] == "3"
    assert run.metric("ragmon_ingest_otlp_incomplete_traces_total", {"outcome": "timed_out_no_root"}) == 1
    [letter] = read_topic(kafka_bootstrap, f"{topic}.dlq")
    assert dict(letter.headers)["ragmon.reason"] == b"otlp_no_root" and len(json.loads(letter.value)) == 2


# -- SIGTERM: stop polling, flush, commit, close; the HTTP endpoints while running ----------------------------

def test_sigterm_flushes_the_buffered_batch_and_commits_and_endpoints_answer(kafka_bootstrap, new_topic, tmp_path):
    import socket
    import urllib.request

    topic = new_topic(2)
    group = f"g-{topic}"
    values, expected = traces("st", 500)
    produce(kafka_bootstrap, topic, values, partitions=2)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cmd = ingest_cmd(topic, group, kafka_bootstrap)
    cmd = [c for c in cmd]
    for flag, value in (("--flush-interval-seconds", "300"), ("--max-batch-rows", "100000"), ("--port", str(port))):
        cmd[cmd.index(flag) + 1] = value
    proc = subprocess.Popen(cmd, env=ingest_env(tmp_path / "chdb"), cwd=ROOT, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)

    def get(path: str) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as r:
                return r.status, r.read().decode()
        except OSError as exc:
            code = getattr(exc, "code", 0)
            return code, ""

    try:
        consumed = f'ragmon_ingest_messages_consumed_total{{topic="{topic}"}} 500.0'
        wait_for(lambda: consumed in get("/metrics")[1], 90, "all 500 messages read (held in the open batch)")
        assert get("/healthz")[0] == 200 and get("/readyz")[0] == 200
        lag = f'ragmon_ingest_consumer_lag_messages{{partition="1",topic="{topic}"}} 0.0'
        wait_for(lambda: lag in get("/metrics")[1], 20, "the per-partition lag gauge")
        assert "ragmon_ingest_traces_stored_total 0.0" in get("/metrics")[1], "nothing written before SIGTERM"
        assert committed(kafka_bootstrap, group) == {}
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert rc == 0, proc.stderr.read() if proc.stderr else ""
    assert exactly_once_problems(count_in_subprocess(tmp_path / "chdb"), expected) == []
    assert committed(kafka_bootstrap, group) == {0: 250, 1: 250}


def test_a_topic_that_does_not_exist_is_named_in_a_warning_at_start(kafka_bootstrap, new_topic, caplog):
    # a typo in kafka.topic would otherwise look like an idle topic: nothing consumed, exit 0 with --exit-when-idle
    existing = new_topic(1)
    caplog.set_level("WARNING", logger="ragmon.stream.source")
    source = KafkaTraceSource(kafka_settings(kafka_bootstrap, existing, f"g-{existing}"))
    source.close()
    assert not [r for r in caplog.records if "does not exist" in r.getMessage()]
    missing = f"{existing}-typo"
    source = KafkaTraceSource(kafka_settings(kafka_bootstrap, missing, f"g-{missing}"))
    source.close()
    [record] = [r for r in caplog.records if "does not exist" in r.getMessage()]
    assert repr(missing) in record.getMessage() and "kafka.topic" in record.getMessage()


class _UndecodableKey(str):
    """A header key whose wire bytes are not UTF-8 (kafka-python's producer writes what encode() returns)."""

    def encode(self, *args: Any, **kwargs: Any) -> bytes:
        return b"\xff\xfe-key"


def test_a_record_the_client_cannot_parse_is_dead_lettered_and_its_neighbours_stored(kafka_bootstrap, new_topic,
                                                                                    store):
    # kafka-python alone raises CorruptRecordError at such a record and then returns nothing more for its
    # partition (kafka_records.py reads it); here each record is a batch of its own, see
    # test_ingest_real_producers.py for records sharing a batch
    topic = new_topic(1)
    group = f"g-{topic}"
    producer = KafkaProducer(bootstrap_servers=kafka_bootstrap)
    for trace_id, headers in (("before", None), ("unreadable", [(_UndecodableKey("k"), b"v")]), ("after", None)):
        producer.send(topic, json.dumps(make_trace(trace_id=trace_id)).encode(), headers=headers)
        producer.flush()
    producer.close()
    run = Running(store, kafka_settings(kafka_bootstrap, topic, group))
    try:
        wait_for(lambda: run.pipeline.idle() and committed(kafka_bootstrap, group) == {0: 3}, 60, "all handled")
    finally:
        run.close()
    assert sorted(stored_ids(store)) == ["after", "before"]
    consumer = KafkaConsumer(f"{topic}.dlq", bootstrap_servers=kafka_bootstrap, auto_offset_reset="earliest",
                             consumer_timeout_ms=5000)
    [letter] = list(consumer)
    consumer.close()
    headers = dict(letter.headers)
    assert headers["ragmon.reason"] == b"unreadable_record" and headers["ragmon.source.offset"] == b"1"
    assert b"not UTF-8" in headers["ragmon.detail"] and json.loads(letter.value)["trace_id"] == "unreadable"
    assert run.metric("ragmon_ingest_dead_letters_total", {"reason": "unreadable_record"}) == 1
