"""Issue 18: traces of the REAL LlamaIndex and LangChain instrumentations, encoded by the REAL OTLP encoder, through
the ingest loop (in-memory source and store). One test per numbered problem; each failed before the fix."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan

from tests.support.instrumented import capture
from tests.support.otel_spans import otlp_messages

T = "otel.spans"


@pytest.fixture(scope="module")
def app() -> Any:
    from tests.support.llamaindex_app import App

    return App()


@pytest.fixture(scope="module")
def chain() -> Any:
    from tests.support.langchain_app import Chain

    return Chain()


def final(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Rows as read with FINAL: per trace id the one with the latest ingested_at (the ReplacingMergeTree version)."""
    out: dict[str, dict[str, Any]] = {}
    for row in rows:
        kept = out.get(row["trace_id"])
        if kept is None or row["ingested_at"] >= kept["ingested_at"]:
            out[row["trace_id"]] = row
    return out


def ingest(rig: Any, spans: list[ReadableSpan], *, per_message: int = 100, encoding: str = "proto",
           **settings: Any) -> Any:
    r = rig(max_batch_rows=100, **settings)
    r.source.append(T, 0, otlp_messages(spans, per_message, encoding))
    r.drive(20)
    return r


def scores(row: dict[str, Any]) -> list[float | None]:
    return [None if math.isnan(s) else s for s in row["retrieved_scores"]]


# -- 1. LangChain: documents without scores or ids --------------------------------------------------------------

def test_1_a_langchain_rag_trace_is_stored_with_no_scores_and_its_document_ids(rig, chain):
    with capture() as spans:
        sent = chain.ask("Is shipping free?")
    r = ingest(rig, list(spans.get_finished_spans()))
    assert r.dlq.letters == []
    [row] = r.writer.rows
    assert row["question"] == sent.question and row["answer"] == sent.answer
    assert row["retrieved_chunk_ids"] == sent.chunk_ids == ["lc-invoices", "lc-shipping"]
    assert scores(row) == [None, None], "no score is invented (0.0 would fake drift)"
    assert row["retrieved_texts"] == sent.texts and row["retrieved_doc_ids"] == ["invoices", "shipping"]
    assert r.metric("ragmon_ingest_otlp_unscored_documents_total") == 2


def test_1_without_document_ids_chunk_ids_are_content_hashes_never_positions(rig):
    from tests.support.langchain_app import Chain

    chain = Chain(with_ids=False)
    with capture() as spans:
        chain.ask("Is shipping free?")
        chain.ask("How are passwords reset?")
    r = ingest(rig, list(spans.get_finished_spans()))
    rows = list(r.writer.rows)
    assert len(rows) == 2
    ids = [cid for row in rows for cid in row["retrieved_chunk_ids"]]
    assert all(cid.startswith("sha256:") for cid in ids)
    by_text = {t: cid for row in rows for t, cid in zip(row["retrieved_texts"], row["retrieved_chunk_ids"],
                                                        strict=True)}
    assert len(set(by_text.values())) == len(by_text), "one id per chunk text, whatever its position"


# -- 2. tokens on the child of LlamaIndex's LLM span; several LLM calls --------------------------------------------

def test_2_tokens_are_summed_over_every_llm_call_and_the_model_is_the_answers(rig, app):
    with capture() as spans:
        one = app.query("How long do refunds take?")
        refine = app.query("How long do refunds take?", k=3, response_mode="refine")  # three LLM calls
    rows = sorted(ingest(rig, list(spans.get_finished_spans())).writer.rows, key=lambda row: row["tokens_prompt"])
    assert [(row["tokens_prompt"], row["tokens_completion"]) for row in rows] == \
        [(one.prompt_tokens, one.completion_tokens), (refine.prompt_tokens, refine.completion_tokens)]
    assert one.prompt_tokens > 0 and refine.prompt_tokens > one.prompt_tokens
    assert {row["model_name"] for row in rows} == {"fake-llm-1"}


# -- 3. the root read before a child ------------------------------------------------------------------------------

def _root_first(spans: list[ReadableSpan]) -> list[ReadableSpan]:
    root = next(s for s in spans if s.parent is None)
    return [root] + [s for s in spans if s is not root]


def test_3_a_root_read_before_its_children_waits_for_them(rig, app):
    with capture() as spans:
        sent = app.query("How long do refunds take?")
    msgs = otlp_messages(_root_first(list(spans.get_finished_spans())), 1, "proto")  # unkeyed one-span messages
    r = rig(max_batch_rows=100)
    r.source.append(T, 0, msgs[:1])
    for _ in range(3):  # 0.9 s: within otlp_settle_seconds
        r.pipeline.step()
        r.clock.advance(0.3)
    assert r.writer.rows == [] and r.pipeline.intake.pending() == 1
    r.source.append(T, 0, msgs[1:])
    r.drive(20)
    [row] = r.writer.rows
    assert row["retrieved_chunk_ids"] == sent.chunk_ids and row["retriever_name"] == "VectorIndexRetriever.retrieve"
    assert "ragmon.otlp.incomplete" not in row["attributes"]


def test_3_spans_after_the_trace_was_stored_make_a_new_version_that_replaces_it(rig, app):
    with capture() as spans:
        sent = app.query("How long do refunds take?")
    finished = list(spans.get_finished_spans())
    llm = [s for s in finished if s.attributes.get("openinference.span.kind") == "LLM"]
    early = [s for s in finished if s not in llm]
    r = rig(max_batch_rows=100)
    r.source.append(T, 0, otlp_messages(early, 100, "proto"))
    r.drive(20)  # 6 s: stored after the settle wait, without an LLM call
    [first] = r.writer.rows
    assert (first["attributes"]["ragmon.otlp.incomplete"] == "true"
            and first["attributes"]["ragmon.otlp.missing"] == "llm")
    assert first["retrieved_chunk_ids"] == sent.chunk_ids and first["tokens_prompt"] == 0
    r.source.append(T, 0, otlp_messages(llm, 100, "proto"))
    r.drive(10)
    assert len(r.writer.rows) == 2
    [row] = final(r.writer.rows).values()
    assert "ragmon.otlp.incomplete" not in row["attributes"] and row["attributes"]["ragmon.otlp.version"] == "2"
    assert (row["tokens_prompt"], row["model_name"]) == (sent.prompt_tokens, "fake-llm-1")
    assert (row["retriever_name"], row["variant"], row["category"], row["ts"]) == \
        (first["retriever_name"], first["variant"], first["category"], first["ts"]), "same sort key: it replaces"
    assert r.metric("ragmon_ingest_otlp_repaired_traces_total") == 1
    assert r.source.committed == {(T, 0): 2}


def test_3_a_repaired_trace_counts_its_unscored_documents_once(rig, chain):
    """A version is the same trace stored again: its documents without scores are not counted again (they were,
    once per version: a LangChain answer whose model call came late counted its two documents twice)."""
    with capture() as spans:
        chain.ask("Is shipping free?")
    finished = list(spans.get_finished_spans())
    llm = [s for s in finished if s.attributes.get("openinference.span.kind") == "LLM"]
    r = rig(max_batch_rows=100)
    r.source.append(T, 0, otlp_messages([s for s in finished if s not in llm], 100, "proto"))
    r.drive(20)
    [first] = r.writer.rows
    assert first["attributes"]["ragmon.otlp.missing"] == "llm" and scores(first) == [None, None]
    r.source.append(T, 0, otlp_messages(llm, 100, "proto"))
    r.drive(10)
    [row] = final(r.writer.rows).values()
    assert row["attributes"]["ragmon.otlp.version"] == "2" and scores(row) == [None, None]
    assert r.metric("ragmon_ingest_otlp_repaired_traces_total") == 1
    assert r.metric("ragmon_ingest_otlp_unscored_documents_total") == 2, "the trace's two documents, once"


def test_3_late_spans_past_the_repair_window_are_dead_lettered_and_counted(rig, app):
    with capture() as spans:
        app.query("How long do refunds take?")
    finished = list(spans.get_finished_spans())
    llm = [s for s in finished if s.attributes.get("openinference.span.kind") == "LLM"]
    r = rig(max_batch_rows=100, otlp_repair_window_seconds=3)
    r.source.append(T, 0, otlp_messages([s for s in finished if s not in llm], 100, "proto"))
    r.drive(30)  # 9 s: stored at 2 s, forgotten at 5 s
    r.source.append(T, 0, otlp_messages(llm, 100, "proto"))
    r.drive(5)
    assert len(r.writer.rows) == 1
    assert r.metric("ragmon_ingest_otlp_incomplete_traces_total", {"outcome": "late_spans"}) == 1
    [letter] = r.dlq.letters
    assert letter.reason == "otlp_late_spans" and len(json.loads(letter.value)) == len(llm)
    assert r.source.committed == {(T, 0): 2}


# -- 4. a reranker --------------------------------------------------------------------------------------------------

def test_4_the_reranked_list_is_the_context_and_the_candidates_stay_retrieved(rig, app):
    with capture() as spans:
        sent = app.query_reranked("How long do refunds take?")
    [row] = ingest(rig, list(spans.get_finished_spans())).writer.rows
    assert row["context_chunk_ids"] == sent.context and len(sent.context) == 2
    assert sent.context != sent.chunk_ids[:2], "the reranker changed the order"
    assert row["retrieved_chunk_ids"] == sent.chunk_ids and scores(row) == pytest.approx(sent.scores)
    assert row["latency_ms"]["rerank"] >= 0 and row["attributes"]["reranker.model_name"] == "fake-llm-1"
    assert (row["tokens_prompt"], row["tokens_completion"]) == (sent.prompt_tokens, sent.completion_tokens)


# -- 5. streaming --------------------------------------------------------------------------------------------------

def test_5_a_streamed_answer_is_the_text_the_model_generated(rig, app):
    with capture() as spans:
        sent = app.query_streaming("How long do refunds take?")
    [row] = ingest(rig, list(spans.get_finished_spans())).writer.rows
    assert row["answer"] == sent.answer and "generator" not in row["answer"]
    assert row["tokens_completion"] == sent.completion_tokens > 0


# -- 6. session.id -------------------------------------------------------------------------------------------------

def test_6_turns_of_one_session_are_different_queries_with_the_session_kept(rig, app):
    with capture() as spans:
        turns = app.chat("session-42", ["How long do refunds take?", "And shipping?"])
    rows = sorted(ingest(rig, list(spans.get_finished_spans())).writer.rows, key=lambda row: row["ts"])
    assert [row["question"] for row in rows] == [t.question for t in turns]
    assert rows[0]["query_id"] != rows[1]["query_id"] and "session-42" not in {row["query_id"] for row in rows}
    assert [row["attributes"]["session.id"] for row in rows] == ["session-42", "session-42"]
    assert [row["answer"] for row in rows] == [t.answer for t in turns]


# -- 7. traces that are not RAG queries ----------------------------------------------------------------------------

def test_7_traces_that_are_not_queries_are_skipped_and_counted(rig, app, chain):
    with capture() as spans:
        app.not_queries()
        chain.without_retrieval("Say hello.")
        sent = app.query("How long do refunds take?")
    r = ingest(rig, list(spans.get_finished_spans()), otlp_repair_window_seconds=3)  # a skip is final after it
    assert [row["question"] for row in r.writer.rows] == [sent.question]
    skipped = {reason: r.metric("ragmon_ingest_otlp_traces_skipped_total", {"reason": reason})
               for reason in ("embedding_only", "llm_only", "no_retriever")}
    assert skipped == {"embedding_only": 2, "llm_only": 1, "no_retriever": 2}  # index: splitter + embeddings
    assert r.dlq.letters == [] and r.pipeline.idle()
