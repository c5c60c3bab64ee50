"""OTLP input: real SDK spans, real OTLP encoder, split across messages, assembled into traces."""

from __future__ import annotations

import json
import math

import pytest

from ragmon.contracts.decode import Rejection
from ragmon.pipeline.offsets import OffsetLedger, release_trace
from ragmon.pipeline.spans.otlp import Span, detect_format, parse_otlp
from ragmon.pipeline.spans.otlp_assembly import OtlpAssembler
from ragmon.stream.source import RawMessage
from tests.support.ingest_rig import trace_bytes
from tests.support.otel_spans import otlp_messages, rag_spans

T = "otel.spans"


@pytest.mark.parametrize("encoding", ["proto", "json_format", "otlp_json"])
def test_spans_split_across_messages_become_one_trace_per_query(rig, encoding):
    spans = rag_spans(5)
    r = rig(max_batch_rows=100)
    r.source.append(T, 0, otlp_messages(spans, 2, encoding))  # 15 spans in 8 messages: traces straddle messages
    r.drive(10)
    rows = {row["query_id"]: row for row in r.writer.rows}
    assert sorted(rows) == [f"q{i}" for i in range(5)]
    row = rows["q3"]
    assert row["question"] == "How do I reset my password? (q3)"
    assert row["answer"] == "Use the reset link on the sign-in page."
    assert row["retrieved_chunk_ids"] == ["kb@c0", "kb@c1", "kb@c2"]
    assert row["retrieved_scores"] == [0.9, 0.8, 0.7]
    assert row["retrieved_doc_ids"] == ["kb", "kb", "kb"] and row["retrieved_doc_versions"] == ["7", "7", "7"]
    assert row["retrieved_texts"][0] == "Passage 0 about passwords."
    assert (row["model_name"], row["tokens_prompt"], row["tokens_completion"]) == ("gen-1", 120, 24)
    assert row["retriever_name"] == "hybrid-retriever" and row["retriever_version"] == "v3"
    assert row["category"] == "account"
    assert set(row["latency_ms"]) == {"total", "retrieve", "generate"}
    assert row["trace_id"] == format(spans[3 * 3 + 2].context.trace_id, "032x")  # q3 root
    assert r.source.committed == {(T, 0): 8}
    assert r.metric("ragmon_ingest_otlp_incomplete_traces_total", {"outcome": "timed_out_no_root"}) == 0


def test_documents_without_a_score_are_stored_without_one_and_counted(rig):
    # a made-up score (0.0) would drag top1_score and mean_score down and fake drift: NaN is stored, which the
    # score features skip, and read back as no score
    r = rig(max_batch_rows=100)
    r.source.append(T, 0, otlp_messages(rag_spans(2, prefix="ok"), 3, "proto"))
    r.source.append(T, 0, otlp_messages(rag_spans(1, prefix="noscore", scores=False), 3, "proto"))
    r.drive(10)
    rows = {row["query_id"]: row for row in r.writer.rows}
    assert sorted(rows) == ["noscore0", "ok0", "ok1"] and r.dlq.letters == []
    assert all(math.isnan(s) for s in rows["noscore0"]["retrieved_scores"])
    assert rows["ok0"]["retrieved_scores"] == [0.9, 0.8, 0.7]
    assert r.metric("ragmon_ingest_otlp_unscored_documents_total") == 3


def test_no_commit_past_a_message_whose_trace_is_still_assembling(rig):
    spans = rag_spans(2)  # finish order: r0 l0 root0 r1 l1 root1
    msgs = otlp_messages(spans, 1, "proto")
    r = rig(max_batch_rows=100, otlp_assembly_wait_seconds=30)
    r.source.append(T, 0, msgs[:4])  # trace 0 complete; trace 1 has only its retriever span
    r.drive(10)
    assert [row["query_id"] for row in r.writer.rows] == ["q0"]
    assert r.source.committed == {(T, 0): 3}, "offset 3 holds a span of a trace still being assembled"
    r.source.append(T, 0, msgs[4:])
    r.drive(10)
    assert [row["query_id"] for row in r.writer.rows] == ["q0", "q1"]
    assert r.source.committed == {(T, 0): 6}


def test_a_trace_without_its_root_is_dead_lettered_at_the_deadline_and_counted(rig):
    spans = rag_spans(2)
    msgs = otlp_messages(spans, 1, "proto")
    r = rig(max_batch_rows=100, otlp_max_query_seconds=2)
    r.source.append(T, 0, msgs[:3] + msgs[3:5])  # trace 1's root never arrives
    r.drive(20)
    assert [row["query_id"] for row in r.writer.rows] == ["q0"]
    assert r.metric("ragmon_ingest_otlp_incomplete_traces_total", {"outcome": "timed_out_no_root"}) == 1
    assert [(d.reason, d.offset) for d in r.dlq.letters] == [("otlp_no_root", 3)]
    assert r.source.committed == {(T, 0): 5}, "dead-lettered: its messages may be committed"


def test_a_root_alone_waits_the_settle_time_then_is_stored_marked_incomplete(rig):
    spans = rag_spans(1)  # retriever, llm, root; the root names its query (ragmon.query_id): a query
    r = rig(max_batch_rows=100, otlp_settle_seconds=2)
    r.source.append(T, 0, [otlp_messages(spans, 1, "proto")[2]])  # children never sent
    for _ in range(5):  # 1.5 s
        r.pipeline.step()
        r.clock.advance(0.3)
    assert r.pipeline.intake.pending() == 1 and r.writer.rows == []
    r.drive(5)
    [row] = r.writer.rows
    assert row["retrieved_chunk_ids"] == [] and row["attributes"]["ragmon.otlp.missing"] == "retriever,llm"
    assert r.source.committed == {(T, 0): 1}


def test_a_dangling_parent_keeps_the_trace_waiting_then_it_is_emitted_marked_incomplete():
    ledger = OffsetLedger()
    assembler = OtlpAssembler(wait_seconds=5, max_pending=10, settle_seconds=1)
    root = Span("a" * 32, "1" * 16, "", "rag", 0, 10, {"input.value": "q?"}, "")
    retriever = Span("a" * 32, "4" * 16, "1" * 16, "r", 1, 2, {"openinference.span.kind": "RETRIEVER"}, "")
    orphan = Span("a" * 32, "3" * 16, "2" * 16, "embed", 1, 2, {}, "")  # its parent span 22… never arrives
    assert assembler.add(RawMessage(T, 0, 0, b""), [retriever, orphan], ledger, now=0.0) == []
    assert assembler.expire(now=100.0) == [], "without its root a trace waits otlp_max_query_seconds"
    out = assembler.add(RawMessage(T, 0, 1, b""), [root], ledger, now=100.0)
    assert out == [] and assembler.pending() == 1
    assert assembler.expire(now=102.0) == [], "settled, but a parent is missing: waits for the deadline"
    assert ledger.committable() == {}
    (item,) = assembler.expire(now=105.0)  # otlp_assembly_wait_seconds after its root
    assert item.outcome == "timed_out_emitted" and b'"ragmon.otlp.incomplete": "true"' in item.document
    assert b'"ragmon.otlp.missing": "llm,parent"' in item.document
    release_trace(item.entries)
    assert ledger.committable() == {(T, 0): 2}


def test_memory_bound_evicts_the_oldest_pending_trace(rig):
    spans = rag_spans(3)
    msgs = otlp_messages(spans, 1, "proto")
    r = rig(max_batch_rows=100, otlp_max_pending_traces=1)
    r.source.append(T, 0, [msgs[0], msgs[3], msgs[6]])  # three traces' retriever spans only
    r.drive(3)
    assert r.pipeline.intake.pending() == 1
    assert r.metric("ragmon_ingest_otlp_incomplete_traces_total", {"outcome": "evicted_no_root"}) == 2
    assert [(d.reason, d.offset) for d in r.dlq.letters] == [("otlp_no_root", 0), ("otlp_no_root", 1)]


def test_auto_format_mixes_native_and_otlp_and_rejects_garbage(rig):
    r = rig(max_batch_rows=100)
    r.source.append(T, 0, otlp_messages(rag_spans(1), 3, "proto") + [trace_bytes(trace_id="native-1")] +
                    [b"\x0a\x05garbage-protobuf", b'{"resourceSpans": 5}'])
    r.drive(10)
    assert sorted(row["trace_id"] for row in r.writer.rows)[1] == "native-1"
    assert [d.reason for d in r.dlq.letters] == ["invalid_otlp", "invalid_otlp"]


def test_resource_attributes_are_not_copied_onto_every_span():
    # N resource attributes on N spans would be N² entries from one message
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    request = ExportTraceServiceRequest()
    resource_spans = request.resource_spans.add()
    for i in range(500):
        attribute = resource_spans.resource.attributes.add()
        attribute.key, attribute.value.string_value = f"k{i}", "v"
    attribute = resource_spans.resource.attributes.add()
    attribute.key, attribute.value.string_value = "service.name", "rag-app"
    scope = resource_spans.scope_spans.add()
    for i in range(500):
        span = scope.spans.add()
        span.trace_id, span.span_id, span.name = bytes([1]) * 16, i.to_bytes(8, "big"), "s"
    spans = parse_otlp(request.SerializeToString(), "otlp_proto", max_bytes=10_000_000)
    assert len(spans) == 500 and all(s.attributes == {"resource.service.name": "rag-app"} for s in spans)


def test_a_native_trace_mentioning_resource_spans_stays_native(rig):
    r = rig(max_batch_rows=100)
    r.source.append(T, 0, [trace_bytes(trace_id="victim", tags=["resourceSpans"]),
                           trace_bytes(trace_id="other", question="what are resource_spans?")])
    r.drive(5)
    assert sorted(row["trace_id"] for row in r.writer.rows) == ["other", "victim"]


def test_detect_format():
    assert detect_format(b'  {"trace_id": "x"}') == "native"
    assert detect_format(b'{"tags": ["resourceSpans"], "trace_id": "x"}') == "native"
    assert detect_format(b'{"resourceSpans": []}') == "otlp_json"
    assert detect_format(b' {\n  "resource_spans" : []}') == "otlp_json"
    assert detect_format(otlp_messages(rag_spans(1), 3, "proto")[0]) == "otlp_proto"
    assert detect_format(b"") == "native"


def test_parse_never_raises_on_hostile_input():
    for data in (b"", b"\x0a", b"\x0a\xff\xff\xff\xff\x0f", b"[]", b'{"resourceSpans": [{"scopeSpans": 1}]}',
                 b"\x00" * 100, b"{" * 10_000):
        for fmt in ("otlp_proto", "otlp_json"):
            result = parse_otlp(data, fmt, max_bytes=1_000_000)
            assert isinstance(result, list | Rejection)


@pytest.mark.parametrize(("key", "value"), [("llm.token_count.prompt", 3.7), ("llm.token_count.completion", True),
                                            ("retrieval.documents.0.document.id", ["x", 1])])
def test_attributes_of_the_wrong_type_dead_letter_the_trace_instead_of_being_coerced(key, value):
    root = Span("b" * 32, "1" * 16, "", "rag", 0, 10, {"input.value": "q?"}, "")
    llm = Span("b" * 32, "2" * 16, "1" * 16, "llm", 1, 2, {"openinference.span.kind": "LLM"}, "")
    retriever = Span("b" * 32, "3" * 16, "1" * 16, "r", 1, 2, {"openinference.span.kind": "RETRIEVER",
                                                              "retrieval.documents.0.document.id": "c1",
                                                              "retrieval.documents.0.document.score": 0.5}, "")
    target = llm if key.startswith("llm") else retriever
    target.attributes[key] = value
    (item,) = OtlpAssembler(wait_seconds=5, max_pending=10).add(RawMessage(T, 0, 0, b""), [root, llm, retriever],
                                                                OffsetLedger(), now=0.0)
    assert item.rejection is not None and item.rejection.reason == "invalid_otlp" and key in item.rejection.detail


def test_embedding_vectors_are_not_decoded():
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    request = ExportTraceServiceRequest()
    span = request.resource_spans.add().scope_spans.add().spans.add()
    span.trace_id, span.span_id, span.name = bytes([2]) * 16, bytes([3]) * 8, "embed"
    for key in ("embedding.embeddings.0.embedding.vector", "embedding.embeddings.0.embedding.text"):
        attribute = span.attributes.add()
        attribute.key = key
    span.attributes[0].value.array_value.values.add().double_value = 0.5
    span.attributes[1].value.string_value = "some text"
    [parsed] = parse_otlp(request.SerializeToString(), "otlp_proto", max_bytes=10_000)
    assert parsed.attributes == {"embedding.embeddings.0.embedding.text": "some text"}


@pytest.mark.parametrize(("attrs", "question"), [
    ({"input.value": "plain text?"}, "plain text?"),
    ({"input.value": '{"message": "from a chat engine?"}', "input.mime_type": "application/json"},
     "from a chat engine?"),
    ({"input.value": '{"query_bundle": {"query_str": "nested?"}}', "input.mime_type": "application/json"}, "nested?"),
    ({"input.value": '"a JSON string?"', "input.mime_type": "application/json"}, "a JSON string?"),
    ({"input.value": '{"unknown": 1}', "input.mime_type": "application/json"}, "from the retriever?"),
    ({"input.value": "{not json, but text}", "input.mime_type": "text/plain"}, "{not json, but text}"),
])
def test_the_question_is_read_from_text_or_the_json_an_instrumentation_recorded(attrs, question):
    from ragmon.pipeline.spans.openinference import build

    root = Span("c" * 32, "1" * 16, "", "rag", 0, 10, {"openinference.span.kind": "CHAIN", **attrs}, "")
    retriever = Span("c" * 32, "2" * 16, "1" * 16, "r", 1, 2, {"openinference.span.kind": "RETRIEVER",
                                                              "input.value": "from the retriever?"}, "")
    mapped = build([root, retriever], incomplete=False)
    assert mapped.document is not None and json.loads(mapped.document)["question"] == question
