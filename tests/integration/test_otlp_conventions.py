"""Interop with the instrumentations teams use besides OpenInference for LlamaIndex and LangChain (issue 34): the REAL
OpenLLMetry instrumentations of LlamaIndex and LangChain (and its OpenAI one), the REAL OpenTelemetry GenAI
conventions (``opentelemetry-instrumentation-openai-v2`` and ``opentelemetry-util-genai``'s retrieval and workflow
spans; Pydantic AI's own instrumentation of an agent with a retrieval tool), and the REAL OpenInference
instrumentations of Haystack and DSPy, on small RAG applications talking to a local OpenAI-compatible server
(``tests/support/conventions_app.py``, one process per family, all at once: they patch the frameworks of the
OpenInference tests, and each other's OpenAI client). Their spans go straight to ragmon's ``/v1/traces`` and
through the real Collector; every stored row is compared field by field with what the application saw, and what an
instrumentation does not carry is named in ``ragmon.otlp.unavailable``.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from ragmon.config import Settings
from ragmon.process import build_process
from ragmon.store import ClickHouseStore
from tests.integration.ingest_support import wait_for
from tests.support.conventions_rows import FAMILIES, compare, rows, run_apps, skips, wait_for_rows

INGEST = {"otlp_settle_seconds": 0.5, "flush_interval_seconds": 0.3, "otlp_repair_window_seconds": 1}


def _serve(store: ClickHouseStore, tmp_path: Path, **ingest: Any) -> Any:
    settings = Settings(server={"port": 0}, store=store.settings, ingest={**INGEST, **ingest},
                        otlp={"port": 0, "token": "tok", "dead_letters": str(tmp_path / "dead.jsonl")})
    process = build_process(settings, ["otlp"], store=store)
    process.serve()
    process.daemon.start()
    return process


def _check(process: Any, store: ClickHouseStore, sent: list[dict[str, Any]], skipped: dict[str, int],
           log: Any = lambda: "") -> None:
    metric = process.telemetry.registry.get_sample_value
    wait_for_rows(store, len(sent), 90, lambda: f"skipped {skips(metric, skipped)}\n{log()}", done=lambda: all(
        v >= skipped[r] for r, v in skips(metric, skipped).items()))
    compare(rows(store), sent)
    assert skips(metric, skipped) == skipped
    assert not metric("ragmon_ingest_otlp_http_requests_total", {"outcome": "invalid"})
    assert metric("ragmon_ingest_otlp_unscored_documents_total") == 2, "LangChain's two documents, and only those"


def test_every_instrumentation_straight_to_v1_traces(store, tmp_path):
    process = _serve(store, tmp_path)
    try:
        sent, skipped = run_apps([f"http://127.0.0.1:{process.listener_port('otlp')}/v1/traces"], "tok")
        assert {s["source"] for s in sent} == set(FAMILIES)
        _check(process, store, sent, skipped)
        assert not (tmp_path / "dead.jsonl").exists() or not (tmp_path / "dead.jsonl").read_text().strip()
    finally:
        process.daemon.stop()
        process.stop_server()


@pytest.mark.collector
def test_every_instrumentation_through_the_collector(store, tmp_path):
    from tests.support.collector import Collector, collector_binary, doc_config

    process = _serve(store, tmp_path)
    try:
        config = copy.deepcopy(doc_config())
        config["exporters"] = {"otlphttp": {
            "traces_endpoint": f"http://127.0.0.1:{process.listener_port('otlp')}/v1/traces", "encoding": "json",
            "compression": "gzip", "headers": {"Authorization": "Bearer tok"}}}
        config["service"]["pipelines"]["traces"]["exporters"] = ["otlphttp"]
        with Collector(collector_binary(), config, tmp_path) as collector:
            sent, skipped = run_apps([collector.otlp_http], "")
            _check(process, store, sent, skipped, collector.log)
    finally:
        process.daemon.stop()
        process.stop_server()


def test_openllmetry_streamed_answers_langchain_stored_llamaindex_never_ends_its_root(store, tmp_path):
    """What OpenLLMetry sends for streamed answers, measured: LangChain's ``chain.stream`` ends its root after the
    model's span, and the query is stored whole (no tokens: ``ChatOpenAI`` asks for a stream's usage only from
    OpenAI's own URL); LlamaIndex's streaming query engine with an OpenAI model never ends its root (nor its
    synthesizer span: they wait for an end-of-stream event of a model span OpenLLMetry leaves to its OpenAI
    instrumentation), so the spans that came, the answer's model call among them, are dead-lettered at
    ``otlp_max_query_seconds`` (3 s here)."""
    process = _serve(store, tmp_path, otlp_max_query_seconds=3)
    try:
        sent, skipped = run_apps([f"http://127.0.0.1:{process.listener_port('otlp')}/v1/traces"], "tok",
                                 ("openllmetry_llamaindex", "openllmetry_langchain"), "--single", "--stream")
        metric = process.telemetry.registry.get_sample_value
        dead = {"kind": "otlp_trace", "outcome": "dead_lettered"}
        wait_for(lambda: metric("ragmon_ingest_traces_settled_total", dead) == 1, 30, "the LlamaIndex query dead")
        wait_for_rows(store, 1, 30)
        [langchain] = [s for s in sent if s["chunk_ids"][0].startswith("lc-")]  # its documents' ids
        [llamaindex] = [s for s in sent if s is not langchain]
        compare(rows(store), [langchain], expected={
            ("openllmetry", "vector_db_retrieve VectorStoreRetriever"): ("openllmetry", "chunk_id,score,tokens")})
        [letter] = [json.loads(line) for line in (tmp_path / "dead.jsonl").read_text().splitlines()]
        assert letter["reason"] == "otlp_no_root"
        spans = json.loads(letter["value"])
        assert all(s["parent_span_id"] for s in spans), "no root"
        [chat] = [s for s in spans if s["name"] == "openai.chat"]
        assert llamaindex["answer"] in chat["attributes"]["gen_ai.output.messages"], "the answer came, its root not"
        assert {"VectorIndexRetriever.task"} <= {s["name"] for s in spans}
        assert metric("ragmon_ingest_otlp_incomplete_traces_total", {"outcome": "timed_out_no_root"}) == 1
        assert metric("ragmon_ingest_traces_consumed_total", {"kind": "otlp_trace"}) == 2
        assert skips(metric, skipped) == skipped
    finally:
        process.daemon.stop()
        process.stop_server()
