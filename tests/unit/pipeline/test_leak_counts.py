"""``ragmon_permission_leaks_total`` counts a leaking trace once however often it is delivered: the store's
deduplication (one row per trace id under FINAL) is the reference, as the listing reads it (docs/leaks.md)."""

from __future__ import annotations

from tests.conftest import make_trace
from tests.support.ingest_rig import trace_bytes

T = "rag.traces"
LABELS = {"retriever": "hybrid@v1", "variant": "production", "stratum": "billing"}


def _chunk(chunk_id: str, tenant: str, rank: int) -> dict:
    return {"chunk_id": chunk_id, "doc_id": "d", "doc_version": "1", "score": 1.0 / rank, "rank": rank,
            "text": "a passage", "tenant": tenant}


def leaky(trace_id: str = "leaky", *foreign: str) -> bytes:
    chunks = [_chunk("acme@1", "acme", 1)] + [_chunk(c, "globex", i + 2) for i, c in enumerate(foreign or ("g@9",))]
    return trace_bytes(trace_id=trace_id, tenant="acme", category="billing", retriever=make_trace()["retriever"],
                       retrieved=chunks)


def test_a_trace_sent_again_is_not_counted_again(rig):
    r = rig(max_batch_rows=10)
    r.source.append(T, 0, [trace_bytes(trace_id=f"ok-{i}") for i in range(5)] + [leaky()])
    r.drive(10)
    assert r.metric("ragmon_permission_leaks_total", LABELS) == 1
    r.source.append(T, 0, [leaky()])  # the producer sends it again (a retry, a replay): a new offset
    r.drive(10)
    r.source.append(T, 0, [leaky(), leaky()])  # twice in one batch
    r.drive(10)
    assert len([t for t in r.writer.trace_ids() if t == "leaky"]) == 4  # stored four times, once under FINAL
    assert r.metric("ragmon_permission_leaks_total", LABELS) == 1


def test_a_replay_after_a_crash_is_not_counted_again(rig):
    r = rig(max_batch_rows=3)
    r.source.append(T, 0, [leaky(f"leaky-{i}") for i in range(3)])
    r.source.fail_commits = 100  # the rows land, the offsets are never committed (kill -9 before the commit)
    r.pipeline.step()
    assert r.metric("ragmon_permission_leaks_total", LABELS) == 3
    r.source.crash()
    r.source.fail_commits = 0
    fresh = rig(max_batch_rows=3, source=r.source, writer=r.writer)  # the restarted process re-reads the tail
    fresh.drive(5)
    assert fresh.metric("ragmon_permission_leaks_total", LABELS) == 0  # its own counter: nothing new leaked


def test_a_lost_acknowledgement_still_counts_the_batch_once(rig):
    r = rig(max_batch_rows=10)
    r.writer.fail_after_write = 1  # the rows land, the ack is lost: the retry must not find them and call them old
    r.source.append(T, 0, [leaky()])
    r.drive(20)
    assert r.writer.attempts == 2 and r.metric("ragmon_permission_leaks_total", LABELS) == 1


def test_a_new_version_counts_only_the_leaks_it_adds(rig):
    """An OTLP trace stored again with late spans is a new version of the same trace: its leaks count once."""
    r = rig(max_batch_rows=10)
    r.source.append(T, 0, [leaky("v", "g@1")])
    r.drive(10)
    r.source.append(T, 0, [leaky("v", "g@1", "g@2")])  # the same trace, now with a second foreign chunk
    r.drive(10)
    assert r.metric("ragmon_permission_leaks_total", LABELS) == 2
