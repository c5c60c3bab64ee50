"""OTLP/HTTP straight in (issue 18): the ``otlp`` role's ``POST /v1/traces`` on its own port, fed by the REAL OTLP
exporter of the opentelemetry-sdk (http/protobuf, gzip) behind the REAL LlamaIndex and LangChain instrumentations,
into the real chDB store; and the protocol's edges (bearer token, partial_success, limits, JSON, 503) over httpx."""

from __future__ import annotations

import gzip
import json
import math
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExportResult

from ragmon.config import Settings
from ragmon.process import Process, build_process
from ragmon.store import ClickHouseStore
from tests.integration.ingest_support import wait_for
from tests.support.instrumented import exporting
from tests.support.otel_spans import otlp_messages, rag_spans

TOKEN = "s3cret-token"


@pytest.fixture
def receiver(store: ClickHouseStore, tmp_path: Path) -> Iterator[Process]:
    """The otlp role alone, on free ports, with a bearer token; running in this process."""
    settings = Settings(server={"port": 0}, store=store.settings,
                        otlp={"port": 0, "token": TOKEN, "max_body_bytes": 200_000,
                              "dead_letters": str(tmp_path / "dead.jsonl")},
                        ingest={"flush_interval_seconds": 0.2, "otlp_settle_seconds": 0.5,
                                "store_retry_max_seconds": 0.5, "otlp_repair_window_seconds": 1})
    process = build_process(settings, ["otlp"], store=store)
    process.serve()
    process.daemon.start()
    try:
        yield process
    finally:
        process.daemon.stop()
        process.stop_server()


def _url(process: Process) -> str:
    return f"http://127.0.0.1:{process.listener_port('otlp')}/v1/traces"


def _rows(store: ClickHouseStore) -> list[dict[str, Any]]:
    return store.query_rows(f"SELECT trace_id, query_id, question, answer, retrieved_chunk_ids, retrieved_scores, "
                            f"retrieved_texts, context_chunk_ids, model_name, tokens_prompt, tokens_completion, "
                            f"session_id, source_topic FROM {store.table('traces')} FINAL ORDER BY ts")


def _metric(process: Process, name: str, labels: dict[str, str] | None = None) -> float:
    return process.telemetry.registry.get_sample_value(name, labels or {}) or 0.0


def test_the_sdk_exporter_sends_llamaindex_and_langchain_traces_that_are_stored_as_sent(receiver, store):
    from tests.support.langchain_app import Chain
    from tests.support.llamaindex_app import App

    app, chain = App(), Chain()
    exporter = OTLPSpanExporter(endpoint=_url(receiver), headers={"Authorization": f"Bearer {TOKEN}"},
                                compression=Compression.Gzip)
    with exporting(BatchSpanProcessor(exporter, schedule_delay_millis=100)):
        sent = [app.query("How long do refunds take?"), app.query_reranked("Where are invoices sent?"),
                app.query_streaming("Is shipping free?"), chain.ask("How are passwords reset?"),
                *app.chat("conv-7", ["How long do refunds take?", "And invoices?"])]
        app.not_queries()
    wait_for(lambda: len(_rows(store)) >= len(sent), 60, "every query stored")
    rows = {(r["question"], r["session_id"]): r for r in _rows(store)}
    assert len(rows) == len(sent)
    for s in sent:
        row = rows[(s.question, s.session_id)]
        assert row["answer"] == s.answer and row["retrieved_chunk_ids"] == s.chunk_ids
        assert [None if math.isnan(x) else x for x in row["retrieved_scores"]] == pytest.approx(s.scores)
        assert row["retrieved_texts"] == s.texts and row["context_chunk_ids"] == s.context
        assert (row["tokens_prompt"], row["tokens_completion"], row["model_name"]) == \
            (s.prompt_tokens, s.completion_tokens, s.model)
        assert row["source_topic"] == "otlp-http" and row["query_id"] == row["trace_id"]
    assert _metric(receiver, "ragmon_ingest_otlp_http_requests_total", {"outcome": "accepted"}) >= 1
    wait_for(lambda: _metric(receiver, "ragmon_ingest_otlp_traces_skipped_total", {"reason": "llm_only"}) == 1, 30,
             "the bare completion skipped (after its settle wait)")


def test_a_wrong_token_is_refused_and_nothing_is_stored(receiver, store):
    exporter = OTLPSpanExporter(endpoint=_url(receiver), headers={"Authorization": "Bearer wrong"})
    assert exporter.export(rag_spans(1)) == SpanExportResult.FAILURE
    assert httpx.post(_url(receiver), content=b"").status_code == 401
    assert _metric(receiver, "ragmon_ingest_otlp_http_requests_total", {"outcome": "unauthorized"}) == 2
    assert _rows(store) == []


def _post(process: Process, body: bytes, *, kind: str = "application/x-protobuf", **headers: str) -> httpx.Response:
    return httpx.post(_url(process), content=body, headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": kind,
                                                           **headers})


def test_json_and_deflate_are_accepted_and_answered_in_kind(receiver, store):
    [body] = otlp_messages(rag_spans(1, prefix="json"), 10, "otlp_json")
    response = _post(receiver, zlib.compress(body), kind="application/json", **{"Content-Encoding": "deflate"})
    assert response.status_code == 200 and response.headers["content-type"] == "application/json"
    assert response.json() == {}
    wait_for(lambda: [r["query_id"] for r in _rows(store)] == ["json0"], 30, "the JSON trace stored")


def test_malformed_spans_are_refused_with_partial_success_and_the_rest_stored(receiver, store):
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    request = ExportTraceServiceRequest()
    request.ParseFromString(otlp_messages(rag_spans(1, prefix="ok"), 10, "proto")[0])
    bad = request.resource_spans[0].scope_spans[0].spans.add()
    bad.trace_id, bad.span_id, bad.name = b"short", b"x" * 8, "broken"
    response = _post(receiver, gzip.compress(request.SerializeToString()), **{"Content-Encoding": "gzip"})
    assert response.status_code == 200
    answer = ExportTraceServiceResponse.FromString(response.content)
    assert answer.partial_success.rejected_spans == 1 and "broken" in answer.partial_success.error_message
    wait_for(lambda: [r["query_id"] for r in _rows(store)] == ["ok0"], 30, "the valid trace stored")
    assert _metric(receiver, "ragmon_ingest_otlp_http_spans_rejected_total") == 1


def test_limits_and_bad_requests_get_their_status(receiver):
    bomb = gzip.compress(b"\x0a" * 5_000_000)  # a few KB that inflate past otlp.max_body_bytes
    assert len(bomb) < 200_000 and _post(receiver, bomb, **{"Content-Encoding": "gzip"}).status_code == 413
    assert _post(receiver, b"x" * 300_000).status_code == 413
    assert _post(receiver, b"{}", kind="text/plain").status_code == 415
    assert _post(receiver, b"x", **{"Content-Encoding": "br"}).status_code == 415
    invalid = _post(receiver, b'{"resourceSpans": 5}', kind="application/json")
    assert invalid.status_code == 400 and "resourceSpans" in json.dumps(invalid.json())


def test_while_store_writes_fail_requests_get_503_and_are_retried_later(receiver, store):
    store.command(f"DETACH TABLE {store.table('traces')}")
    try:
        [body] = otlp_messages(rag_spans(1, prefix="first"), 10, "proto")
        assert _post(receiver, body).status_code == 200  # accepted; its write fails: the loop pauses
        wait_for(lambda: receiver.service("otlp").paused, 30, "the loop paused")
        refused = _post(receiver, otlp_messages(rag_spans(1, prefix="later"), 10, "proto")[0])
        assert refused.status_code == 503 and refused.headers["retry-after"] == "1"
    finally:
        store.command(f"ATTACH TABLE {store.table('traces')}")
    wait_for(lambda: [r["query_id"] for r in _rows(store)] == ["first0"], 60, "the accepted trace stored")


def test_what_is_still_assembling_at_shutdown_is_read_again_from_the_spool_by_the_next_process(store, tmp_path):
    def start(settle_seconds: float) -> Process:
        settings = Settings(server={"port": 0}, store=store.settings,
                            otlp={"port": 0, "dead_letters": str(tmp_path / "dead.jsonl")},
                            ingest={"otlp_settle_seconds": settle_seconds, "flush_interval_seconds": 0.2})
        process = build_process(settings, ["otlp"], store=store)
        process.serve()
        process.daemon.start()
        return process

    process = start(60)
    try:
        spans = rag_spans(1, prefix="held")
        root_only = [s for s in spans if s.parent is None]  # waits 60 s for its children
        body = otlp_messages(root_only, 10, "proto")[0]
        assert httpx.post(_url(process), content=body,
                          headers={"Content-Type": "application/x-protobuf"}).status_code == 200
        wait_for(lambda: process.service("otlp").intake.pending() == 1, 30, "the trace assembling")
    finally:
        assert process.daemon.stop() == []
        process.stop_server()
    assert _rows(store) == [], "still assembling: left in the spool, not stored half"
    assert _metric(process, "ragmon_ingest_traces_settled_total", {"kind": "otlp_trace", "outcome": "released"}) == 1
    again = start(0.5)  # the same store and database: the same spool
    try:
        wait_for(lambda: [r["query_id"] for r in _rows(store)] == ["held0"], 30, "the trace stored after the restart")
    finally:
        again.daemon.stop()
        again.stop_server()
