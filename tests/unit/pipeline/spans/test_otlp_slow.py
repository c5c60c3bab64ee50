"""Issue 30, defect 2: a slow query is not lost. The spans a query ends early (retriever, embeddings) wait for its
root up to ``ingest.otlp_max_query_seconds``; a trace whose root never comes is dead-lettered with the spans that
came; each trace is counted once, in its final outcome; a row's ``ingested_at`` is when it was written.

The REAL LlamaIndex instrumentation's spans, the REAL OTLP encoder, the ingest loop over the in-memory doubles with
an injected clock: two minutes pass in a few hundred loop steps."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan

from ragmon.pipeline.offsets import OffsetLedger
from ragmon.pipeline.spans.otlp import Span
from ragmon.pipeline.spans.otlp_assembly import OtlpAssembler
from ragmon.stream.file_source import FileTraceSource
from ragmon.stream.source import RawMessage
from tests.support.ingest_rig import trace_bytes
from tests.support.instrumented import capture
from tests.support.otel_spans import otlp_messages

T = "otel.spans"
SETTLED = "ragmon_ingest_traces_settled_total"
CONSUMED = "ragmon_ingest_traces_consumed_total"


@pytest.fixture(scope="module")
def app() -> Any:
    from tests.support.llamaindex_app import App

    return App()


def _kind(span: ReadableSpan) -> str:
    return str((span.attributes or {}).get("openinference.span.kind", ""))


def split_at_retrieval(spans: list[ReadableSpan]) -> tuple[list[ReadableSpan], list[ReadableSpan]]:
    """The spans that ended by the time retrieval ended (what an exporter sends first: the retriever and its query
    embedding), and the rest (the LLM calls, the synthesizer, the root), as a slow answer sends them later."""
    retrieved_at = max(s.end_time for s in spans if _kind(s) == "RETRIEVER")
    early = [s for s in spans if s.end_time <= retrieved_at]
    return early, [s for s in spans if s not in early]


def retriever_subtree(spans: list[ReadableSpan]) -> list[ReadableSpan]:
    """The RETRIEVER spans and every span below them."""
    ids = {s.context.span_id for s in spans if _kind(s) == "RETRIEVER"}
    grew = True
    while grew:
        below = {s.context.span_id for s in spans if s.parent is not None and s.parent.span_id in ids}
        grew = not below <= ids
        ids |= below
    return [s for s in spans if s.context.span_id in ids]


def run_for(r: Any, seconds: float, step: float = 0.5) -> None:
    for _ in range(int(seconds / step)):
        r.pipeline.step()
        r.clock.advance(step)


def test_a_root_that_ends_two_minutes_after_its_retriever_is_stored_whole(rig, app):
    with capture() as spans:
        sent = app.query("How long do refunds take?")
    early, late = split_at_retrieval(list(spans.get_finished_spans()))
    assert [_kind(s) for s in early] == ["EMBEDDING", "EMBEDDING", "RETRIEVER", "RETRIEVER"]
    r = rig(max_batch_rows=100)  # every ingest.otlp_* setting at its default
    r.source.append(T, 0, otlp_messages(early, 100, "proto"))
    run_for(r, 120)  # the LLM takes two minutes
    assert r.writer.rows == [] and r.dlq.letters == [] and r.pipeline.intake.pending() == 1
    assert r.source.committed == {}, "the waiting trace holds its message uncommitted"
    r.source.append(T, 0, otlp_messages(late, 100, "proto"))
    r.drive(10)
    [row] = r.writer.rows
    assert row["retrieved_chunk_ids"] == sent.chunk_ids and row["answer"] == sent.answer
    assert (row["tokens_prompt"], row["tokens_completion"]) == (sent.prompt_tokens, sent.completion_tokens)
    assert "ragmon.otlp.incomplete" not in row["attributes"] and row["attributes"]["otel.span_count"] == "14"
    assert r.dlq.letters == [] and r.source.committed == {(T, 0): 2}
    assert r.metric("ragmon_ingest_otlp_traces_skipped_total", {"reason": "no_retriever"}) == 0


def test_a_trace_whose_root_never_arrives_is_dead_lettered_with_its_spans(rig, app):
    with capture() as spans:
        app.query("How long do refunds take?")
    early, late = split_at_retrieval(list(spans.get_finished_spans()))
    r = rig(max_batch_rows=100)  # otlp_max_query_seconds: 600 by default
    r.source.append(T, 0, otlp_messages(early, 100, "proto"))
    run_for(r, 595, step=5)
    assert r.dlq.letters == [] and r.pipeline.intake.pending() == 1
    r.drive(5, advance=5)
    [letter] = r.dlq.letters
    assert letter.reason == "otlp_no_root" and "ingest.otlp_max_query_seconds (600 s)" in letter.detail
    kept = json.loads(letter.value)
    assert sorted(s["span_id"] for s in kept) == sorted(format(s.context.span_id, "016x") for s in early)
    assert r.writer.rows == [] and r.source.committed == {(T, 0): 1}
    assert r.metric("ragmon_ingest_otlp_incomplete_traces_total", {"outcome": "timed_out_no_root"}) == 1
    # the root ends after all: its spans follow the others to the dead letters; the trace is not counted again
    r.source.append(T, 0, otlp_messages(late, 100, "proto"))
    r.drive(5)
    assert [d.reason for d in r.dlq.letters] == ["otlp_no_root", "otlp_late_spans"] and r.writer.rows == []
    assert r.metric(CONSUMED, {"kind": "otlp_trace"}) == 1
    assert r.metric(SETTLED, {"kind": "otlp_trace", "outcome": "dead_lettered"}) == 1
    assert r.source.committed == {(T, 0): 2}


def test_the_longest_query_is_a_setting(rig, app):
    with capture() as spans:
        app.query("Where are invoices sent?")
    early, _ = split_at_retrieval(list(spans.get_finished_spans()))
    r = rig(max_batch_rows=100, otlp_max_query_seconds=3600)
    r.source.append(T, 0, otlp_messages(early, 100, "proto"))
    run_for(r, 3590, step=10)
    assert r.dlq.letters == [] and r.pipeline.intake.pending() == 1
    r.drive(5, advance=5)
    assert [d.reason for d in r.dlq.letters] == ["otlp_no_root"] and "(3600 s)" in r.dlq.letters[0].detail


def test_rootless_traces_evicted_past_the_memory_bound_are_dead_lettered_with_their_spans():
    ledger = OffsetLedger()
    assembler = OtlpAssembler(wait_seconds=60, max_pending=1000, max_bytes=3_000)
    out = []
    for i in range(10):  # root-less spans of ten traces, 1,000 bytes of message each
        orphan = Span(f"{i:032x}", "3" * 16, "2" * 16, "embed", 1, 2, {}, "")
        out += assembler.add(RawMessage(T, 0, i, b"x" * 1_000), [orphan], ledger, now=0.0)
    assert assembler.pending_bytes() <= 3_000 and assembler.pending() == 3
    assert [a.outcome for a in out] == ["evicted_no_root"] * 7
    for i, item in enumerate(out):
        assert item.rejection is not None and item.rejection.reason == "otlp_no_root"
        assert "otlp_max_pending" in item.rejection.detail
        assert item.document is not None and json.loads(item.document)[0]["trace_id"] == f"{i:032x}"


def test_each_trace_is_counted_once_in_its_final_outcome(rig, app):
    with capture() as spans:
        app.query("How long do refunds take?")
    whole = list(spans.get_finished_spans())
    with capture() as spans:
        app.query("Where are invoices sent?")
    slow = list(spans.get_finished_spans())
    retriever = retriever_subtree(slow)
    with capture() as spans:
        app.query("Is shipping free?")
    rootless, _ = split_at_retrieval(list(spans.get_finished_spans()))
    with capture() as spans:
        app.not_queries()  # an index built (a splitter trace, an embedding trace), an embedding, a completion
    others = list(spans.get_finished_spans())

    r = rig(max_batch_rows=100, otlp_repair_window_seconds=30, otlp_max_query_seconds=60)
    r.source.append(T, 0, [trace_bytes(trace_id="native-1"), b"{not json"])
    r.source.append(T, 0, otlp_messages(whole, 100, "proto") + otlp_messages(others, 100, "proto"))
    r.source.append(T, 0, otlp_messages([s for s in slow if s not in retriever], 100, "proto"))
    r.source.append(T, 0, otlp_messages(rootless, 100, "proto"))
    run_for(r, 10)  # the slow query, without its retriever, is skipped (no_retriever) while it waits …
    assert len(r.writer.rows) == 2
    r.source.append(T, 0, otlp_messages(retriever, 100, "proto"))
    run_for(r, 10)  # … and stored when the retriever's spans come
    assert len(r.writer.rows) == 3
    run_for(r, 60)  # every repair window closes; the root-less trace reaches its deadline
    r.drive(5)
    skipped = {reason: r.metric("ragmon_ingest_otlp_traces_skipped_total", {"reason": reason})
               for reason in ("embedding_only", "llm_only", "no_retriever")}
    assert skipped == {"embedding_only": 2, "llm_only": 1, "no_retriever": 1}, "the slow query is not skipped"
    settled = {(kind, outcome): r.metric(SETTLED, {"kind": kind, "outcome": outcome})
               for kind in ("message", "otlp_trace") for outcome in ("stored", "dead_lettered", "skipped", "released")}
    assert {k: v for k, v in settled.items() if v} == {
        ("message", "stored"): 1, ("message", "dead_lettered"): 1,
        ("otlp_trace", "stored"): 2, ("otlp_trace", "skipped"): 4, ("otlp_trace", "dead_lettered"): 1}
    consumed = {kind: r.metric(CONSUMED, {"kind": kind}) for kind in ("message", "otlp_trace")}
    assert consumed == {"message": 2, "otlp_trace": 7}
    assert r.metric("ragmon_ingest_otlp_open_traces", {"loop": "ingest"}) == 0
    assert [d.reason for d in r.dlq.letters] == ["invalid_json", "otlp_no_root"]


def test_traces_still_open_at_shutdown_are_counted_released_once(rig, app):
    with capture() as spans:
        app.query("How long do refunds take?")
    early, _ = split_at_retrieval(list(spans.get_finished_spans()))
    with capture() as spans:
        app.llm.complete("Say hello.")  # a trace that is not a query: skipped, its repair window still open
    r = rig(max_batch_rows=100)
    r.source.append(T, 0, otlp_messages(early, 100, "proto") + otlp_messages(list(spans.get_finished_spans()), 100,
                                                                          "proto"))
    r.drive(10)
    assert r.metric("ragmon_ingest_otlp_open_traces", {"loop": "ingest"}) == 2
    r.pipeline.shutdown()  # the Kafka source re-reads what is uncommitted: the waiting trace is released
    assert r.metric(SETTLED, {"kind": "otlp_trace", "outcome": "released"}) == 1
    assert r.metric(SETTLED, {"kind": "otlp_trace", "outcome": "skipped"}) == 1
    assert r.metric("ragmon_ingest_otlp_traces_skipped_total", {"reason": "llm_only"}) == 1
    assert r.metric(CONSUMED, {"kind": "otlp_trace"}) == 2 and r.source.committed == {}


def test_ingested_at_is_when_the_row_is_written_not_when_its_batch_opened(rig):
    r = rig(max_batch_rows=100, flush_interval_seconds=5)  # its first batch opens now
    time.sleep(0.01)
    written_after = datetime.now(UTC)
    r.source.append(T, 0, [trace_bytes(trace_id="late-1")])
    r.drive(30)
    [row] = r.writer.rows
    assert row["ingested_at"] >= written_after


def test_an_input_that_ended_does_not_keep_its_traces_waiting(rig, app, tmp_path: Path):
    with capture() as spans:
        sent = app.query("How long do refunds take?")
    whole = list(spans.get_finished_spans())
    with capture() as spans:
        app.query("Is shipping free?")
    rootless, _ = split_at_retrieval(list(spans.get_finished_spans()))
    path = tmp_path / "spans.jsonl"
    path.write_bytes(b"\n".join(otlp_messages(whole, 100, "otlp_json") + otlp_messages(rootless, 100, "otlp_json")))
    source = FileTraceSource([path], topic=f"file:{path}", max_line_bytes=1_000_000)
    r = rig(source=source, max_batch_rows=100)
    for _ in range(40):  # 4 s of the loop's clock: the file ends, and no more spans can come
        r.pipeline.step()
        r.clock.advance(0.1)
        if r.dlq.letters:
            break
    assert [row["question"] for row in r.writer.rows] == [sent.question]
    assert [d.reason for d in r.dlq.letters] == ["otlp_no_root"] and "input ended" in r.dlq.letters[0].detail
