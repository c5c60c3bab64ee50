"""Interop with the real thing (issue 18): the REAL OpenTelemetry Collector (built from Go modules by
``scripts/otel-collector``, running docs/otlp.md's configuration) in front of the real Kafka broker, driven by the
REAL LlamaIndex and LangChain instrumentations on a tiny in-process RAG, read by ragmon's ingest loop into the real
chDB store. Every stored row is compared field by field with what the application saw, in both encodings, keyed
and unkeyed, with each compression; and a Collector forwarding OTLP/JSON to ragmon's /v1/traces.

Each case starts its own Collector (about a second) on its own topic; the whole file runs in about a minute.
"""

from __future__ import annotations

import copy
import math
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from ragmon.config import Settings
from ragmon.process import build_process
from ragmon.store import ClickHouseStore
from tests.integration.ingest_support import Running, kafka_settings, wait_for
from tests.support.collector import Collector, collector_binary, doc_config
from tests.support.instrumented import SERVICE, exporting
from tests.support.llamaindex_app import Sent

pytestmark = [pytest.mark.kafka, pytest.mark.collector]

#: the skipped traces of ``_drive``: the index ``App.not_queries`` builds (a splitter trace and an embedding
#: trace), an embedding alone, a bare completion, and LangChain's chain without a retriever
SKIPPED = {"embedding_only": 2, "llm_only": 1, "no_retriever": 2}
#: a skip is counted when its repair window closes: a short one keeps the wait for the counts short
INGEST = {"otlp_settle_seconds": 0.5, "flush_interval_seconds": 0.3, "otlp_repair_window_seconds": 1}


@pytest.fixture(scope="module")
def binary() -> Path:
    return collector_binary()


@pytest.fixture(scope="module")
def apps() -> tuple[Any, Any]:
    from tests.support.langchain_app import Chain
    from tests.support.llamaindex_app import App

    return App(), Chain()


def _drive(apps: tuple[Any, Any], endpoint: str) -> list[Sent]:
    """Every scenario, exported by the SDK's OTLP/HTTP exporter through a batch processor (as applications do)."""
    app, chain = apps
    with exporting(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint), schedule_delay_millis=200)):
        sent = [app.query("How long do refunds take?"),
                app.query("Where are invoices sent?", k=3, response_mode="refine"),  # three LLM calls
                app.query_reranked("Is shipping free?"),
                app.query_streaming("How are passwords reset?"),
                *app.chat("conversation-1", ["How long do refunds take?", "And invoices?"]),
                chain.ask("Is shipping free?")]
        app.not_queries()
        chain.without_retrieval("Say hello.")
    return sent


def _rows(store: ClickHouseStore) -> list[dict[str, Any]]:
    return store.query_rows(f"SELECT *, session_id, top1_score FROM {store.table('traces')} FINAL")


def _compare(rows: list[dict[str, Any]], sent: list[Sent]) -> None:
    """Each stored row equals what the application saw, field by field."""
    assert len(rows) == len(sent), f"{len(rows)} rows for {len(sent)} queries"
    by_key = {(r["question"], r["attributes"].get("session.id", ""), tuple(r["retrieved_chunk_ids"])): r for r in rows}
    for s in sent:
        row = by_key[(s.question, s.session_id, tuple(s.chunk_ids))]
        where = f"{s.question!r} ({s.session_id or 'no session'})"
        assert row["answer"] == s.answer, where
        assert [None if math.isnan(x) else x for x in row["retrieved_scores"]] == pytest.approx(s.scores), where
        assert row["retrieved_texts"] == s.texts and row["context_chunk_ids"] == s.context, where
        assert row["retrieved_ranks"] == list(range(1, len(s.chunk_ids) + 1)), where
        assert (row["tokens_prompt"], row["tokens_completion"], row["model_name"]) == \
            (s.prompt_tokens, s.completion_tokens, s.model), where
        assert row["query_id"] == row["trace_id"] and row["session_id"] == s.session_id, where
        assert row["attributes"]["service.name"] == SERVICE and "ragmon.otlp.incomplete" not in row["attributes"], where
        assert row["attributes"]["ragmon.otlp.conventions"] == "openinference", where
        # LangChain's retriever gives no scores, its fake chat model neither a model name nor token counts
        assert row["attributes"].get("ragmon.otlp.unavailable", "") \
            == ("score,model,tokens" if s.model == "" else ""), where
        assert row["retriever_name"] == ("VectorStoreRetriever" if s.model == "" else "VectorIndexRetriever.retrieve")
        assert {"total", "retrieve"} <= set(row["latency_ms"]) and row["latency_total_ms"] > 0, where
        assert (row["retrieved_doc_ids"][0] != "") and (s.context == [] or row["latency_ms"]["rerank"] >= 0), where
    unscored = [r for r in rows if r["retrieved_chunk_ids"] and math.isnan(r["top1_score"])]
    assert len(unscored) == 1, "LangChain's documents, and only those, have no score"


@pytest.mark.parametrize(("encoding", "keyed", "compression"), [
    ("otlp_proto", True, "gzip"), ("otlp_json", False, "snappy"), ("otlp_proto", False, "lz4"),
    ("otlp_json", True, "zstd")])
def test_collector_to_kafka_to_ragmon(binary, apps, store, kafka_bootstrap, new_topic, tmp_path, encoding, keyed,
                                      compression):
    topic = new_topic(3)
    config = copy.deepcopy(doc_config())
    kafka = config["exporters"]["kafka"]
    kafka["brokers"] = [kafka_bootstrap]
    kafka["traces"].update(topic=topic, encoding=encoding)
    kafka["partition_traces_by_id"] = keyed
    kafka["producer"]["compression"] = compression
    run = Running(store, kafka_settings(kafka_bootstrap, topic, f"g-{topic}"), **INGEST)
    try:
        with Collector(binary, config, tmp_path) as collector:
            sent = _drive(apps, collector.otlp_http)
        wait_for(lambda: len(_rows(store)) >= len(sent) and all(
            run.metric("ragmon_ingest_otlp_traces_skipped_total", {"reason": r}) >= n for r, n in SKIPPED.items()),
            90, f"{len(sent)} queries stored and the other traces skipped:\n{collector.log()}")
        _compare(_rows(store), sent)
        assert {r: run.metric("ragmon_ingest_otlp_traces_skipped_total", {"reason": r}) for r in SKIPPED} == SKIPPED
        assert run.metric("ragmon_ingest_dead_letters_total", {"reason": "invalid_otlp"}) == 0
        assert run.metric("ragmon_ingest_otlp_unscored_documents_total") == 2
        consumed = run.metric("ragmon_ingest_messages_consumed_total", {"topic": topic})
        assert consumed > 0 and (keyed or consumed < len(sent) + sum(SKIPPED.values())), \
            "unkeyed, the exporter packs several traces into one message"
    finally:
        run.close()


def test_collector_forwarding_otlp_json_to_v1_traces(binary, apps, store, tmp_path):
    settings = Settings(server={"port": 0}, store=store.settings, ingest=INGEST,
                        otlp={"port": 0, "token": "tok", "dead_letters": str(tmp_path / "dead.jsonl")})
    process = build_process(settings, ["otlp"], store=store)
    process.serve()
    process.daemon.start()
    try:
        config = copy.deepcopy(doc_config())
        config["exporters"] = {"otlphttp": {
            "traces_endpoint": f"http://127.0.0.1:{process.listener_port('otlp')}/v1/traces", "encoding": "json",
            "compression": "gzip", "headers": {"Authorization": "Bearer tok"}}}
        config["service"]["pipelines"]["traces"]["exporters"] = ["otlphttp"]
        with Collector(binary, config, tmp_path) as collector:
            sent = _drive(apps, collector.otlp_http)
        metric = process.telemetry.registry.get_sample_value
        wait_for(lambda: len(_rows(store)) >= len(sent) and all(
            (metric("ragmon_ingest_otlp_traces_skipped_total", {"reason": r}) or 0) >= n for r, n in SKIPPED.items()),
            90, f"{len(sent)} queries stored:\n{collector.log()}")
        _compare(_rows(store), sent)
        assert (metric("ragmon_ingest_otlp_http_requests_total", {"outcome": "accepted"}) or 0) > 0
        assert not metric("ragmon_ingest_otlp_http_requests_total", {"outcome": "invalid"})
    finally:
        process.daemon.stop()
        process.stop_server()
