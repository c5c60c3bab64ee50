"""Issue 30, defect 2, against the real parts: a query whose answer takes two minutes is stored whole on both OTLP
paths, and one whose root span never comes is dead-lettered with the spans that did.

The REAL LlamaIndex OpenInference instrumentation on the tiny in-process RAG (``tests/support/llamaindex_app.py``)
with a model that takes its time; the SDK's REAL ``BatchSpanProcessor`` and OTLP/HTTP exporter send each span when
it ends, so the retriever's spans reach ragmon minutes before the LLM's and the root's, as they do from an
application. The two paths: the REAL OpenTelemetry Collector (docs/otlp.md's configuration) → the real Kafka broker
→ ragmon's ingest loop; and ragmon's own ``POST /v1/traces``. Each path writes into its own database of the real
chDB store; every ``ingest.otlp_*`` setting is at its default unless a test says otherwise.
"""

from __future__ import annotations

import copy
import json
import math
import threading
import time
from contextlib import ExitStack
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from ragmon.config import Settings
from ragmon.process import Process, build_process
from ragmon.store import ClickHouseStore
from tests.integration.ingest_support import Running, kafka_settings, wait_for
from tests.support.collector import Collector, collector_binary, doc_config
from tests.support.instrumented import exporting
from tests.support.llamaindex_app import Sent

#: how long the model thinks: the root span ends this long after the retriever's
ANSWER_SECONDS = 121


@pytest.fixture(scope="module")
def app() -> Any:
    from tests.support.llamaindex_app import App

    return App()


def receiver(store: ClickHouseStore, tmp_path: Path, **ingest: Any) -> Process:
    """The otlp role in this process, on a free port, writing into ``store``."""
    settings = Settings(server={"port": 0}, store=store.settings, ingest=ingest,
                        otlp={"port": 0, "dead_letters": str(tmp_path / "otlp-dead.jsonl"),
                              "spool_dir": str(tmp_path / "spool")})
    process = build_process(settings, ["otlp"], store=store)
    process.serve()
    process.daemon.start()
    return process


def rows(store: ClickHouseStore) -> list[dict[str, Any]]:
    return store.query_rows(f"SELECT *, session_id FROM {store.table('traces')} FINAL")


def in_background(work: Any) -> tuple[threading.Thread, list[Any]]:
    result: list[Any] = []
    thread = threading.Thread(target=lambda: result.append(work()), daemon=True)
    thread.start()
    return thread, result


def check_whole(row: dict[str, Any], sent: Sent) -> None:
    """The stored row is the query as the application saw it, answer and all, not marked incomplete."""
    assert row["question"] == sent.question and row["answer"] == sent.answer
    assert row["retrieved_chunk_ids"] == sent.chunk_ids and row["retrieved_texts"] == sent.texts
    assert [None if math.isnan(x) else x for x in row["retrieved_scores"]] == pytest.approx(sent.scores)
    assert (row["tokens_prompt"], row["tokens_completion"], row["model_name"]) == \
        (sent.prompt_tokens, sent.completion_tokens, sent.model)
    assert "ragmon.otlp.incomplete" not in row["attributes"]
    assert row["latency_ms"]["total"] >= ANSWER_SECONDS * 1000 > 1000 > row["latency_ms"]["retrieve"], \
        "the root ended two minutes after the retriever"
    ended = row["ts"] + timedelta(milliseconds=row["latency_total_ms"])
    assert row["ingested_at"] >= ended, "ingested_at is when the row was written, after the query ended"


@pytest.mark.slow
@pytest.mark.kafka
@pytest.mark.collector
def test_a_query_answered_two_minutes_after_its_retrieval_is_stored_whole_on_both_otlp_paths(
        app, store, store_settings, kafka_bootstrap, new_topic, tmp_path):
    topic = new_topic(1)
    config = copy.deepcopy(doc_config())
    config["exporters"]["kafka"]["brokers"] = [kafka_bootstrap]
    config["exporters"]["kafka"]["traces"]["topic"] = topic
    http_store = ClickHouseStore.open(store_settings.model_copy(update={"database": store_settings.database + "_h"}))
    with ExitStack() as stack:
        stack.callback(http_store.command, f"DROP DATABASE IF EXISTS {http_store.settings.database}")
        kafka_path = Running(store, kafka_settings(kafka_bootstrap, topic, f"g-{topic}"))
        stack.callback(kafka_path.close)
        http_path = receiver(http_store, tmp_path)
        stack.callback(http_path.stop_server)
        stack.callback(http_path.daemon.stop)
        collector = stack.enter_context(Collector(collector_binary(), config, tmp_path))
        for endpoint in (collector.otlp_http, f"http://127.0.0.1:{http_path.listener_port('otlp')}/v1/traces"):
            stack.enter_context(exporting(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint),
                                                             schedule_delay_millis=200)))
        thinking = threading.Event()
        query, sent = in_background(lambda: app.query_slowly(
            "How long do refunds take?", lambda: (thinking.set(), time.sleep(ANSWER_SECONDS))))
        assert thinking.wait(30), "the model was never asked"
        # the retriever's spans arrive on both paths at once and wait there for their root
        wait_for(lambda: kafka_path.pipeline.intake.pending() == 1 == http_path.service("otlp").intake.pending(),
                 60, f"the early spans on both paths:\n{collector.log()}")
        assert rows(store) == [] and rows(http_store) == []
        query.join(ANSWER_SECONDS + 60)
        assert not query.is_alive() and sent, "the query finished"
        wait_for(lambda: len(rows(store)) == 1 == len(rows(http_store)), 60,
                 f"the query stored on both paths:\n{collector.log()}")
        for where in (store, http_store):
            [row] = rows(where)
            check_whole(row, sent[0])
        for metric in (kafka_path.metric, lambda name, labels: (
                http_path.telemetry.registry.get_sample_value(name, labels) or 0.0)):
            assert metric("ragmon_ingest_traces_consumed_total", {"kind": "otlp_trace"}) == 1
            assert metric("ragmon_ingest_traces_settled_total", {"kind": "otlp_trace", "outcome": "stored"}) == 1
            assert metric("ragmon_ingest_otlp_incomplete_traces_total", {"outcome": "timed_out_no_root"}) == 0
            assert metric("ragmon_ingest_otlp_traces_skipped_total", {"reason": "no_retriever"}) == 0
    assert not (tmp_path / "otlp-dead.jsonl").exists() or (tmp_path / "otlp-dead.jsonl").read_text() == ""


def test_a_query_whose_root_never_ends_is_dead_lettered_with_the_spans_that_came(app, store, tmp_path):
    """The application dies while its model thinks (its exporter has sent the retriever's spans, nothing more
    ever comes): at ``otlp_max_query_seconds`` (3 s here, to keep CI short) the spans go to the dead letters with
    the reason, and the trace is counted once."""
    http_path = receiver(store, tmp_path, otlp_max_query_seconds=3)
    never = threading.Event()
    try:
        endpoint = f"http://127.0.0.1:{http_path.listener_port('otlp')}/v1/traces"
        with exporting(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint), schedule_delay_millis=200)):
            thinking = threading.Event()
            in_background(lambda: app.query_slowly("Is shipping free?", lambda: (thinking.set(), never.wait(300))))
            assert thinking.wait(30)
            wait_for(lambda: http_path.service("otlp").intake.pending() == 1, 30, "the retriever's spans")
        # the exporter is gone (the application crashed): the root and the LLM span are never sent
        metric = http_path.telemetry.registry.get_sample_value
        wait_for(lambda: metric("ragmon_ingest_traces_settled_total",
                                {"kind": "otlp_trace", "outcome": "dead_lettered"}) == 1, 30, "the dead letter")
        [letter] = [json.loads(line) for line in (tmp_path / "otlp-dead.jsonl").read_text().splitlines()]
        assert letter["reason"] == "otlp_no_root" and "ingest.otlp_max_query_seconds (3 s)" in letter["detail"]
        spans = json.loads(letter["value"])
        kinds = {s["attributes"]["openinference.span.kind"] for s in spans}
        assert {"RETRIEVER", "EMBEDDING"} <= kinds and "LLM" not in kinds and all(s["parent_span_id"] for s in spans)
        assert metric("ragmon_ingest_traces_consumed_total", {"kind": "otlp_trace"}) == 1
        assert rows(store) == []
    finally:
        never.set()
        http_path.daemon.stop()
        http_path.stop_server()
