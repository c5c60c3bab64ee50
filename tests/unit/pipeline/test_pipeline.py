"""The ingest loop against in-memory doubles: delivery, backpressure, dead letters, commits, rebalance."""

from __future__ import annotations

import json
import random
import threading
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ragmon.pipeline.batcher import FlushWait
from ragmon.pipeline.writer import InMemoryTraceWriter
from ragmon.stream.backoff import Backoff
from ragmon.stream.source import InMemoryTraceSource
from tests.support.ingest_rig import SEED, trace_bytes

T = "rag.traces"


def test_every_trace_is_stored_once_and_offsets_committed_to_the_end(rig):
    r = rig(max_batch_rows=7)
    r.source.append(T, 0, [trace_bytes(trace_id=f"a{i}") for i in range(20)])
    r.source.append(T, 1, [trace_bytes(trace_id=f"b{i}") for i in range(13)])
    r.drive(20)
    assert sorted(r.writer.trace_ids()) == sorted([f"a{i}" for i in range(20)] + [f"b{i}" for i in range(13)])
    assert r.source.committed == {(T, 0): 20, (T, 1): 13}
    assert r.metric("ragmon_ingest_traces_stored_total") == 33
    assert r.metric("ragmon_ingest_messages_consumed_total", {"topic": T}) == 33
    # every committed offset was covered by an acknowledged write when it was committed
    rows = r.writer.rows
    assert {(row["source_partition"], row["source_offset"]) for row in rows} == \
        {(0, i) for i in range(20)} | {(1, i) for i in range(13)}


def test_store_down_pauses_consumption_commits_nothing_then_recovers(rig):
    r = rig(max_batch_rows=10)
    r.writer.fail_next = 4
    r.source.append(T, 0, [trace_bytes(trace_id=f"t{i}") for i in range(25)])
    r.pipeline.step()  # reads 25 (max_poll = max_batch_rows... in-memory returns up to max_batch_rows)
    assert r.source.paused, "a failed write must pause consumption"
    assert r.source.committed == {}
    assert r.metric("ragmon_ingest_paused") == 1
    position_while_paused = dict(r.source.position)
    for _ in range(3):
        r.pipeline.step()
        assert r.source.position == position_while_paused, "nothing new is read while paused"
        assert r.source.committed == {}
    r.drive(60)
    assert not r.source.paused and r.metric("ragmon_ingest_paused") == 0
    assert sorted(r.writer.trace_ids()) == sorted(f"t{i}" for i in range(25))
    assert r.source.committed == {(T, 0): 25}
    assert r.metric("ragmon_ingest_store_retries_total") == 4
    assert r.metric("ragmon_ingest_flush_failures_total", {"stage": "store", "kind": "retryable"}) == 4


def test_a_failed_batch_is_retried_on_the_backoff_schedule_not_before(rig):
    r = rig(max_batch_rows=5, store_retry_max_seconds=1.0)
    r.writer.fail_next = 30
    r.source.append(T, 0, [trace_bytes() for _ in range(5)])
    # the same rule, clock and seed as the pipeline's own: it predicts when each retry is due
    schedule = Backoff(1.0, clock=r.clock, rng=random.Random(SEED))
    r.pipeline.step()
    delays = []
    for attempt in range(1, 9):
        assert r.writer.attempts == attempt
        delays.append(schedule.failed(retryable=True))
        r.clock.now = schedule.retry_at - 0.001
        r.pipeline.step()
        assert r.writer.attempts == attempt, "retried before the delay ran out"
        assert r.source.paused
        r.clock.now = schedule.retry_at
        r.pipeline.step()
    assert r.writer.attempts == 9
    assert delays[0] < delays[3] and max(delays) <= 1.0
    assert r.source.committed == {}


def test_lost_ack_is_absorbed_by_the_dedup_token(rig):
    r = rig(max_batch_rows=10)
    r.writer.fail_after_write = 1  # the rows land, the acknowledgement is lost, the batch is retried
    r.source.append(T, 0, [trace_bytes(trace_id=f"t{i}") for i in range(10)])
    r.drive(20)
    assert sorted(r.writer.trace_ids()) == sorted(f"t{i}" for i in range(10))
    assert r.writer.attempts == 2 and len(r.writer.tokens) == 1


def test_crash_after_insert_before_commit_replays_without_loss(rig):
    r = rig(max_batch_rows=10)
    r.source.append(T, 0, [trace_bytes(trace_id=f"t{i}") for i in range(10)])
    r.source.fail_commits = 100  # commits fail, as a kill -9 between insert and commit would leave them
    r.pipeline.step()
    assert r.source.committed == {} and len(r.writer.rows) == 10
    r.source.crash()
    r.source.fail_commits = 0
    fresh = rig(max_batch_rows=10, source=r.source, writer=r.writer)  # a restarted process: same source, same store
    fresh.drive(5)
    assert sorted(set(r.writer.trace_ids())) == sorted(f"t{i}" for i in range(10))
    assert r.source.committed == {(T, 0): 10}


def test_dead_letter_failure_blocks_the_commit(rig):
    r = rig(max_batch_rows=100)
    r.dlq.fail_next = 3
    r.source.append(T, 0, [trace_bytes(trace_id="good1"), b"{not json", trace_bytes(trace_id="good2")])
    for _ in range(6):
        r.pipeline.step()
        r.clock.advance(0.3)
    assert r.source.committed == {}, "no commit while the dead letter is not acknowledged"
    assert r.writer.trace_ids() == ["good1", "good2"]  # the store write happened once and is not repeated
    r.drive(40)
    assert r.source.committed == {(T, 0): 3}
    assert [d.reason for d in r.dlq.letters] == ["invalid_json"]
    assert r.writer.trace_ids() == ["good1", "good2"]
    assert r.metric("ragmon_ingest_flush_failures_total", {"stage": "dead_letter", "kind": "retryable"}) == 3


def test_dead_letters_carry_reason_source_and_original_bytes(rig):
    r = rig()
    bad = {
        "invalid_json": b"{nope",
        "schema": trace_bytes(retrieved="not a list"),
        "non_finite_score": trace_bytes(retrieved=[{"chunk_id": "c", "score": float("nan"), "rank": 1}]),
        "too_large": trace_bytes(question="x" * 2_000_000),
        "outside_retention": trace_bytes(timestamp=(datetime.now(UTC) - timedelta(days=400)).isoformat()),
        "not_an_object": b"[1, 2]",
    }
    r.source.append(T, 3, list(bad.values()) + [trace_bytes(trace_id="ok")])
    r.drive(10)
    assert r.writer.trace_ids() == ["ok"]
    letters = {d.reason: d for d in r.dlq.letters}
    assert set(letters) == set(bad)
    for i, (reason, value) in enumerate(bad.items()):
        d = letters[reason]
        assert d.value == value and (d.topic, d.partition, d.offset) == (T, 3, i)
        headers = dict(d.kafka_headers())
        assert headers["ragmon.reason"] == reason.encode()
        assert headers["ragmon.source.offset"] == str(i).encode() and headers["ragmon.detail"]
        assert r.metric("ragmon_ingest_dead_letters_total", {"reason": reason}) == 1
    assert r.source.committed == {(T, 3): 7}


def test_unknown_fields_are_counted_and_redaction_applies(rig):
    r = rig()
    doc = json.loads(trace_bytes(trace_id="u1", question="mail me at ann@example.com or +44 20 7946 0958"))
    doc["new_field_from_the_future"] = 1
    r.source.append(T, 0, [json.dumps(doc).encode()])
    r.drive(5)
    row = r.writer.rows[0]
    assert "ann@example.com" not in row["question"] and "[REDACTED:email]" in row["question"]
    assert "[REDACTED:phone]" in row["question"]
    assert r.metric("ragmon_ingest_unknown_fields_total") == 1
    assert r.metric("ragmon_ingest_redactions_total", {"pattern": "email"}) == 1


def test_revoke_flushes_and_returns_offsets_to_commit(rig):
    r = rig(max_batch_rows=1000, flush_interval_seconds=100)
    r.source.append(T, 0, [trace_bytes(trace_id=f"t{i}") for i in range(5)])
    r.pipeline.step()
    assert r.writer.rows == []  # buffered, not yet due
    r.source.revoke({(T, 0)})
    assert len(r.writer.rows) == 5 and r.source.committed == {(T, 0): 5}


def test_revoke_while_store_down_commits_nothing_and_loses_nothing(rig):
    r = rig(max_batch_rows=1000, flush_interval_seconds=100)
    r.source.append(T, 0, [trace_bytes(trace_id=f"t{i}") for i in range(5)])
    r.pipeline.step()
    r.writer.fail_next = 1
    r.source.revoke({(T, 0)})
    assert r.writer.rows == [] and r.source.committed == {}
    assert not r.source.paused  # nothing buffered any more: the re-read batch pauses again if need be
    r.drive(40, advance=5)
    assert sorted(r.writer.trace_ids()) == [f"t{i}" for i in range(5)]
    assert r.source.committed == {(T, 0): 5}


def test_lag_series_of_partitions_given_away_are_removed_from_metrics(rig):
    # a frozen lag left on /metrics by the old owner would win max by (topic, partition) and page on-call
    r = rig(max_batch_rows=1000, flush_interval_seconds=100)
    for part in (0, 1, 2):
        r.source.append(T, part, [trace_bytes(trace_id=f"t{part}-{i}") for i in range(3)])
    lag = "ragmon_ingest_consumer_lag_messages"

    def series() -> set[str]:
        return {s.labels["partition"] for m in r.telemetry.registry.collect() if m.name == lag for s in m.samples}

    r.pipeline.step()
    assert series() == {"0", "1", "2"}
    r.source.revoke({(T, 1)})  # the rebalance listener's path
    del r.source.partitions[(T, 1)]
    assert series() == {"0", "2"}
    del r.source.partitions[(T, 2)]  # gone from the assignment without a revoke (partitions lost)
    r.clock.advance(5)
    r.pipeline.step()
    assert series() == {"0"}
    assert r.metric(lag, {"topic": T, "partition": "0"}) == 0


def test_shutdown_flushes_and_commits(rig):
    r = rig(max_batch_rows=1000, flush_interval_seconds=100)
    r.source.append(T, 0, [trace_bytes() for _ in range(3)])
    stop = threading.Event()
    r.pipeline.step()
    stop.set()
    r.pipeline.run(stop)
    assert len(r.writer.rows) == 3 and r.source.committed == {(T, 0): 3}


# -- property: mixed valid/invalid streams ------------------------------------------------------------------

_INVALID = {
    "invalid_json": b"{\"trace_id\": ",
    "schema": json.dumps({"trace_id": "x"}).encode(),
    "non_finite_score": None,  # built per message below
}


@st.composite
def streams(draw):
    n = draw(st.integers(1, 60))
    kinds = draw(st.lists(st.sampled_from(["valid", "valid", "invalid_json", "schema", "non_finite_score"]),
                          min_size=n, max_size=n))
    parts = draw(st.lists(st.integers(0, 2), min_size=n, max_size=n))
    return list(zip(kinds, parts, strict=True))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(stream=streams(), batch=st.integers(1, 20), store_failures=st.integers(0, 3), dlq_failures=st.integers(0, 2),
       concurrent=st.booleans())
def test_mixed_streams_store_every_valid_once_and_dead_letter_every_invalid(rig, stream, batch, store_failures,
                                                                           dlq_failures, concurrent):
    r = rig(max_batch_rows=batch, concurrent_writes=concurrent)
    r.writer.fail_next = store_failures
    r.dlq.fail_next = dlq_failures
    expected_valid, expected_invalid = set(), {}
    for i, (kind, part) in enumerate(stream):
        if kind == "valid":
            value = trace_bytes(trace_id=f"v{i}")
            expected_valid.add(f"v{i}")
        elif kind == "non_finite_score":
            value = trace_bytes(trace_id=f"x{i}", retrieved=[{"chunk_id": "c", "score": float("inf"), "rank": 1}])
        else:
            value = _INVALID[kind]
        offset = len(r.source.partitions.get((T, part), []))
        if kind != "valid":
            expected_invalid[(part, offset)] = kind
        r.source.append(T, part, [value])
    r.drive(200)
    stored = r.writer.trace_ids()
    assert sorted(stored) == sorted(expected_valid), "every valid trace stored exactly once"
    got = {}
    for d in r.dlq.letters:
        got.setdefault((d.partition, d.offset), d.reason)
    assert got == expected_invalid, "every invalid message dead-lettered once with its reason"
    ends = {(T, p): len(v) for p_, v in r.source.partitions.items() for p in [p_[1]]}
    assert r.source.committed == ends


def test_messages_polled_after_a_failed_write_in_the_same_poll_are_still_handled(rig):
    r = rig(max_batch_rows=5, flush_interval_seconds=100)
    r.source.append(T, 0, [trace_bytes(trace_id=f"t{i}") for i in range(3)])
    r.pipeline.step()  # 3 buffered, batch not full, not due
    r.source.append(T, 0, [trace_bytes(trace_id=f"t{i}") for i in range(3, 8)])
    r.writer.fail_next = 1
    r.pipeline.step()  # full after 2 more: the write fails; the other 3 of this poll must not be skipped
    r.drive(40, advance=5)
    assert sorted(r.writer.trace_ids()) == sorted(f"t{i}" for i in range(8))
    assert r.source.committed == {(T, 0): 8}


def test_concurrent_writes_overlap_and_keep_every_guarantee(rig):
    r = rig(max_batch_rows=10, concurrent_writes=True)
    r.source.append(T, 0, [trace_bytes(trace_id=f"t{i}") for i in range(95)])
    r.source.append(T, 1, [b"{bad"] * 3)
    r.drive(60)
    assert sorted(r.writer.trace_ids()) == sorted(f"t{i}" for i in range(95))
    assert r.source.committed == {(T, 0): 95, (T, 1): 3} and len(r.dlq.letters) == 3


def test_an_unexpected_writer_exception_is_retried_not_fatal(rig):
    store = InMemoryTraceWriter()

    class Buggy:
        calls = 0

        def write(self, columns, dedup_token):
            Buggy.calls += 1
            if Buggy.calls == 1:
                raise TypeError("a bug in a writer")
            return store.write(columns, dedup_token)

    r = rig(max_batch_rows=5, writer=store, write=Buggy())
    r.source.append(T, 0, [trace_bytes(trace_id=f"t{i}") for i in range(5)])
    r.pipeline.step()
    assert r.source.paused and r.source.committed == {}
    r.drive(40)
    assert sorted(r.writer.trace_ids()) == [f"t{i}" for i in range(5)]
    assert r.metric("ragmon_ingest_flush_failures_total", {"stage": "store", "kind": "permanent"}) == 1


class _TimeoutRecorder(InMemoryTraceSource):
    def __init__(self) -> None:
        super().__init__()
        self.timeouts: list[float] = []

    def poll(self, timeout_seconds, max_records):
        self.timeouts.append(timeout_seconds)
        return super().poll(timeout_seconds, max_records)


def test_an_idle_loop_blocks_in_poll_and_a_buffered_batch_bounds_the_wait(rig, monkeypatch):
    monkeypatch.setattr("ragmon.pipeline.loop.MAX_POLL_SECONDS", 0.25)  # the loop's own wait (the rig shortens it)
    source = _TimeoutRecorder()
    r = rig(max_batch_rows=1000, flush_interval_seconds=1.0, source=source)
    r.clock.advance(30)  # long idle: the open, empty batch is far older than the flush interval
    r.pipeline.step()
    assert source.timeouts[-1] == 0.25  # nothing buffered: block (before the fix this was 0, a busy loop)
    source.append(T, 0, [trace_bytes()])
    r.pipeline.step()  # the first trace after the idle spell: the batch is due at once and written
    assert len(r.writer.rows) == 1
    source.append(T, 0, [trace_bytes()])
    r.pipeline.step()  # buffered in a fresh batch
    r.clock.advance(0.9)
    r.pipeline.step()
    assert source.timeouts[-1] == pytest.approx(0.1)  # the wait ends when the batch is due
    r.clock.advance(0.2)
    r.pipeline.step()
    assert source.timeouts[-1] == 0.0 and len(r.writer.rows) == 2


def test_a_freshness_target_lengthens_the_batches_while_inserts_are_fast(rig):
    """``ingest.freshness_target_seconds``: after fast inserts (an in-memory store), a batch waits longer than
    ``flush_interval_seconds`` and no longer than the target; without it, every batch waits the interval."""
    r = rig(max_batch_rows=1000, flush_interval_seconds=1.0, freshness_target_seconds=3.0)
    for i in range(12):  # more inserts than the wait remembers
        r.source.append(T, 0, [trace_bytes(trace_id=f"t{i}")])
        r.drive(steps=12, advance=0.3)
    assert len(r.writer.rows) == 12
    assert 1.0 < r.pipeline.batches.batch.limits.max_wait_seconds <= 3.0 - FlushWait.MARGIN_SECONDS
    plain = rig(max_batch_rows=1000, flush_interval_seconds=1.0)
    plain.source.append(T, 0, [trace_bytes()])
    plain.drive(steps=12, advance=0.3)
    assert plain.pipeline.batches.batch.limits.max_wait_seconds == 1.0
