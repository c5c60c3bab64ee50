"""Interop with the instrumentations teams use besides OpenInference for LlamaIndex and LangChain (issue 34): the REAL
OpenLLMetry instrumentations of LlamaIndex and LangChain (and its OpenAI one), the REAL OpenTelemetry GenAI
conventions (``opentelemetry-instrumentation-openai-v2`` and ``opentelemetry-util-genai``'s retrieval and workflow
spans; Pydantic AI's own instrumentation of an agent with a retrieval tool), and the REAL OpenInference
instrumentations of Haystack and DSPy, on small RAG applications talking to a local OpenAI-compatible server
(``tests/support/conventions_app.py``, one process per family: they patch the same frameworks as the OpenInference
tests, and each other's OpenAI client). Their spans go straight to ragmon's ``/v1/traces`` and through the real
Collector; every stored row is compared field by field with what the application saw, and what an instrumentation
does not carry is named in ``ragmon.otlp.unavailable``.
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ragmon.config import Settings
from ragmon.process import build_process
from ragmon.store import ClickHouseStore
from tests.integration.ingest_support import ROOT, wait_for

INGEST = {"otlp_settle_seconds": 0.5, "flush_interval_seconds": 0.3, "otlp_repair_window_seconds": 1}
#: per application: the conventions its rows were read by, and the fields its instrumentation does not carry
#: (LlamaIndex's model calls are GenAI spans of OpenLLMetry's OpenAI instrumentation; LangChain's chat-model spans
#: carry traceloop.* attributes too)
EXPECTED = {
    ("openllmetry", "VectorIndexRetriever.task"): ("genai,openllmetry", ""),
    ("openllmetry", "vector_db_retrieve VectorStoreRetriever"): ("openllmetry", "chunk_id,score"),
    ("genai", "retrieval kb"): ("genai", "text"),
    ("haystack", "InMemoryBM25Retriever.run"): ("openinference", ""),
    ("dspy", "ColBERTv2.__call__"): ("openinference", "tokens"),
    # the agent run is read by Pydantic AI's own attributes, its model and tool calls are plain GenAI spans
    ("pydantic_ai", "execute_tool search_docs"): ("genai,pydantic_ai", ""),
}
FAMILIES = ("openllmetry", "genai", "haystack", "dspy", "pydantic_ai")


def _run_apps(endpoint: str, token: str) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """Every family, each in its own process; what they sent and the skips expected of them all."""
    sent: list[dict[str, Any]] = []
    skipped = {"embedding_only": 0, "llm_only": 0, "no_retriever": 0}
    for family in FAMILIES:
        out = subprocess.run([sys.executable, "-m", "tests.support.conventions_app", endpoint, token, family],
                             cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)
        assert out.returncode == 0, out.stderr[-4000:]
        lines = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
        sent += [x for x in lines if "source" in x]
        for reason, n in next(x["skipped"] for x in lines if "skipped" in x).items():
            skipped[reason] += n
    return sent, skipped


def _rows(store: ClickHouseStore) -> list[dict[str, Any]]:
    return store.query_rows(f"SELECT *, session_id, top1_score FROM {store.table('traces')} FINAL")


def _compare(rows: list[dict[str, Any]], sent: list[dict[str, Any]]) -> None:
    assert len(rows) == len(sent), f"{len(rows)} rows for {len(sent)} queries"
    by_question = {r["question"]: r for r in rows}
    seen: set[tuple[str, str]] = set()
    assert len(by_question) == len(rows)
    for s in sent:
        row = by_question[s["question"]]
        where = f"{s['source']}: {s['question']!r}"
        conventions, unavailable = EXPECTED[(s["source"], row["retriever_name"])]
        ids = s["chunk_ids"]
        if "chunk_id" in unavailable:  # not carried: ragmon's id from the content, never a position
            ids = ["sha256:" + hashlib.sha256(t.encode()).hexdigest()[:32] for t in s["texts"]]
        assert row["answer"] == s["answer"], where
        assert row["retrieved_chunk_ids"] == ids, where
        assert [None if math.isnan(x) else x for x in row["retrieved_scores"]] == pytest.approx(s["scores"]), where
        assert row["retrieved_texts"] == (s["texts"] or [""] * len(ids)), where
        assert row["retrieved_ranks"] == list(range(1, len(ids) + 1)), where
        assert row["context_chunk_ids"] == s["context"], where
        assert (row["tokens_prompt"], row["tokens_completion"], row["model_name"]) == \
            (s["prompt_tokens"], s["completion_tokens"], s["model"]), where
        assert row["query_id"] == row["trace_id"], where
        if s["session_id"]:  # Pydantic AI's conversation id (gen_ai.conversation.id)
            assert row["session_id"] == s["session_id"], where
        attributes = row["attributes"]
        assert attributes["ragmon.otlp.conventions"] == conventions, where
        assert attributes.get("ragmon.otlp.unavailable", "") == unavailable, where
        assert "ragmon.otlp.incomplete" not in attributes, where
        assert {"total", "retrieve", "generate"} <= set(row["latency_ms"]) and row["latency_total_ms"] > 0, where
        if s["source"] not in ("genai", "dspy"):  # their documents carry no metadata
            assert all(row["retrieved_doc_ids"]), where
        seen.add((s["source"], row["retriever_name"]))
    assert seen == set(EXPECTED), "a row of every instrumentation"


def _skips(metric: Any, skipped: dict[str, int]) -> dict[str, float]:
    return {r: metric("ragmon_ingest_otlp_traces_skipped_total", {"reason": r}) or 0 for r in skipped}


def _serve(store: ClickHouseStore, tmp_path: Path) -> Any:
    settings = Settings(server={"port": 0}, store=store.settings, ingest=INGEST,
                        otlp={"port": 0, "token": "tok", "dead_letters": str(tmp_path / "dead.jsonl")})
    process = build_process(settings, ["otlp"], store=store)
    process.serve()
    process.daemon.start()
    return process


def _check(process: Any, store: ClickHouseStore, sent: list[dict[str, Any]], skipped: dict[str, int],
           log: Any = lambda: "") -> None:
    metric = process.telemetry.registry.get_sample_value
    try:
        wait_for(lambda: len(_rows(store)) >= len(sent) and all(
            v >= skipped[r] for r, v in _skips(metric, skipped).items()), 90, f"{len(sent)} queries stored")
    except AssertionError as exc:
        stored = [(r["question"], r["retriever_name"], r["attributes"]) for r in _rows(store)]
        raise AssertionError(f"{exc}; stored {stored}, skipped {_skips(metric, skipped)}\n{log()}") from None
    _compare(_rows(store), sent)
    assert _skips(metric, skipped) == skipped
    assert not metric("ragmon_ingest_otlp_http_requests_total", {"outcome": "invalid"})
    assert metric("ragmon_ingest_otlp_unscored_documents_total") == 2, "LangChain's two documents, and only those"


def test_every_instrumentation_straight_to_v1_traces(store, tmp_path):
    process = _serve(store, tmp_path)
    try:
        sent, skipped = _run_apps(f"http://127.0.0.1:{process.listener_port('otlp')}/v1/traces", "tok")
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
            sent, skipped = _run_apps(collector.otlp_http, "")
            _check(process, store, sent, skipped, collector.log)
    finally:
        process.daemon.stop()
        process.stop_server()
