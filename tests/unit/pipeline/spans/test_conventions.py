"""Each span read by its own convention (ragmon/pipeline/spans/conventions.py, openllmetry.py, genai.py): attribute
values as the real instrumentations record them (OpenLLMetry 0.62 for LlamaIndex and LangChain, openai-v2 2.4b0 and
opentelemetry-util-genai 1.1b0, pydantic-ai-slim 2.31, captured from tests/support/conventions_app.py), mapped by
``openinference.build``.
The same applications are driven end to end in tests/integration/test_otlp_conventions.py."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest

from ragmon.pipeline.spans import openinference
from ragmon.pipeline.spans.conventions import canonical, convention
from ragmon.pipeline.spans.otlp import Span

TRACE = "ab" * 16


def span(span_id: str, parent: str, name: str, start: int, end: int, **attrs: Any) -> Span:
    return canonical(Span(TRACE, span_id * 8, parent * 8 if parent else "", name, start, end, attrs, ""))


def node(node_id: str, text: str, score: float | None, doc_id: str) -> str:
    """A ``NodeWithScore`` as OpenLLMetry's LlamaIndex instrumentation serialises it (JSON text in a JSON list)."""
    return json.dumps({"node": {"id_": node_id, "embedding": None, "metadata": {"doc_id": doc_id, "doc_version": "3"},
                                "text": text, "class_name": "TextNode"}, "score": score, "class_name": "NodeWithScore"})


NODES = [node("n-refunds", "Refunds take five days.", 0.4, "refunds"), node("n-invoices", "Invoices by email.", 0.21,
                                                                             "invoices")]


def chat(span_id: str, parent: str, start: int, end: int, answer: str, **extra: Any) -> Span:
    """A model call as OpenLLMetry's OpenAI instrumentation (and openai-v2 with content on spans) records it."""
    return span(span_id, parent, "openai.chat", start, end, **{
        "gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai", "gen_ai.request.model": "gpt-4o-mini",
        "gen_ai.response.model": "gpt-4o-mini-2024", "gen_ai.usage.input_tokens": 77, "gen_ai.usage.output_tokens": 9,
        "gen_ai.input.messages": json.dumps([{"role": "user", "parts": [{"type": "text", "content": "How long?"}]}]),
        "gen_ai.output.messages": json.dumps([{"role": "assistant", "parts": [{"type": "text", "content": answer}],
                                               "finish_reason": "stop"}]), **extra})


def llamaindex_trace(*, rerank: bool = False) -> list[Span]:
    spans = [
        span("1", "", "RetrieverQueryEngine.workflow", 0, 900, **{
            "traceloop.span.kind": "workflow", "traceloop.entity.name": "RetrieverQueryEngine.workflow",
            "traceloop.entity.input": '{"str_or_query_bundle": "How long do refunds take?"}',
            "traceloop.entity.output": json.dumps({"response": "Five days.", "metadata": {}})}),
        span("2", "1", "VectorIndexRetriever.task", 10, 100, **{
            "traceloop.span.kind": "task", "traceloop.entity.name": "VectorIndexRetriever.task",
            "traceloop.entity.input": '{"str_or_query_bundle": {"query_str": "How long do refunds take?"}}',
            "traceloop.entity.output": json.dumps(NODES)}),
        chat("4", "1", 300, 800, "Five days."),
    ]
    if rerank:  # a postprocessor: nodes in, nodes out (the second first)
        spans.append(span("3", "1", "StructuredLLMRerank.task", 110, 290, **{
            "traceloop.span.kind": "task", "traceloop.entity.name": "StructuredLLMRerank.task",
            "traceloop.entity.input": json.dumps({"nodes": NODES, "query_bundle": {"query_str": "How long?"}}),
            "traceloop.entity.output": json.dumps([NODES[1]])}))
    return spans


def build(spans: list[Span]) -> dict[str, Any]:
    mapped = openinference.build(spans, incomplete=False)
    assert mapped.document is not None, mapped.skipped
    return json.loads(mapped.document)


def test_openllmetry_llamaindex_query_is_stored_with_ids_scores_texts_tokens_and_model():
    doc = build(llamaindex_trace())
    assert doc["question"] == "How long do refunds take?" and doc["answer"] == "Five days."
    assert [(d["chunk_id"], d["score"], d["text"], d["doc_id"], d["doc_version"], d["rank"])
            for d in doc["retrieved"]] \
        == [("n-refunds", 0.4, "Refunds take five days.", "refunds", "3", 1),
            ("n-invoices", 0.21, "Invoices by email.", "invoices", "3", 2)]
    assert doc["tokens"] == {"prompt": 77, "completion": 9} and doc["model"]["name"] == "gpt-4o-mini-2024"
    assert doc["retriever"]["name"] == "VectorIndexRetriever.task" and doc["context"]["chunk_ids"] == []
    assert doc["latency_ms"] == {"total": 0.0009, "retrieve": 0.00009, "generate": 0.0005}
    assert doc["attributes"]["ragmon.otlp.conventions"] == "genai,openllmetry"
    assert "ragmon.otlp.unavailable" not in doc["attributes"] and "ragmon.otlp.incomplete" not in doc["attributes"]


def test_a_llamaindex_postprocessor_is_the_reranker_and_its_output_is_the_context():
    doc = build(llamaindex_trace(rerank=True))
    assert [d["chunk_id"] for d in doc["retrieved"]] == ["n-refunds", "n-invoices"]
    assert doc["context"]["chunk_ids"] == ["n-invoices"] and "rerank" in doc["latency_ms"]


def test_openllmetry_langchain_documents_have_no_id_nor_score_and_the_row_says_so():
    docs = [{"page_content": "Invoices by email.", "metadata": {"doc_id": "invoices"}},
            {"page_content": "Shipping is free.", "metadata": {"doc_id": "shipping"}}]
    spans = [
        span("1", "", "RunnableSequence.workflow", 0, 900, **{
            "traceloop.span.kind": "workflow", "gen_ai.operation.name": "invoke_agent",
            "traceloop.entity.input": '{"inputs": "Is shipping free?", "tags": [], "metadata": {}, "kwargs": {}}',
            "traceloop.entity.output": '{"outputs": "It is.", "kwargs": {"tags": []}}'}),
        span("2", "1", "vector_db_retrieve VectorStoreRetriever", 10, 50, **{
            "traceloop.span.kind": "task", "gen_ai.operation.name": "vector_db_retrieve",
            "traceloop.entity.name": "VectorStoreRetriever",
            "traceloop.entity.input": '{"query": "Is shipping free?"}',
            "traceloop.entity.output": json.dumps({"documents": docs, "count": 2})}),
        chat("3", "1", 60, 800, "It is.", **{"traceloop.workflow.name": "RunnableSequence"}),
    ]
    doc = build(spans)
    assert (doc["question"], doc["answer"]) == ("Is shipping free?", "It is.")
    assert [d["chunk_id"] for d in doc["retrieved"]] == [
        "sha256:" + hashlib.sha256(d["page_content"].encode()).hexdigest()[:32] for d in docs]
    assert [d["score"] for d in doc["retrieved"]] == [None, None]
    assert [d["doc_id"] for d in doc["retrieved"]] == ["invoices", "shipping"]
    assert doc["attributes"]["ragmon.otlp.unavailable"] == "chunk_id,score"
    assert doc["attributes"]["ragmon.otlp.conventions"] == "openllmetry"
    assert openinference.build(spans, incomplete=False).unscored == 2


def genai_trace(documents: Any, **chat_extra: Any) -> list[Span]:
    """util-genai's workflow and retrieval spans around an openai-v2 chat span."""
    return [
        span("1", "", "invoke_workflow support-rag", 0, 900, **{
            "gen_ai.operation.name": "invoke_workflow", "gen_ai.workflow.name": "support-rag",
            "gen_ai.conversation.id": "conv-7",
            "gen_ai.input.messages": json.dumps([{"role": "user", "parts": [{"content": "How are invoices sent?",
                                                                              "type": "text"}]}]),
            "gen_ai.output.messages": json.dumps([{"role": "assistant", "parts": [{"content": "By email.",
                                                                                   "type": "text"}],
                                                   "finish_reason": "stop"}])}),
        span("2", "1", "retrieval kb", 10, 50, **{
            "gen_ai.operation.name": "retrieval", "gen_ai.data_source.id": "kb",
            "gen_ai.retrieval.query.text": "How are invoices sent?", "gen_ai.retrieval.documents": documents}),
        chat("3", "1", 60, 800, "By email.", **chat_extra),
    ]


def test_genai_conventions_retrieval_workflow_and_model_call():
    doc = build(genai_trace(json.dumps([{"id": "kb-1", "score": 0.9}, {"id": "kb-2", "score": 0.5}])))
    assert (doc["question"], doc["answer"]) == ("How are invoices sent?", "By email.")
    assert [(d["chunk_id"], d["score"], d["rank"]) for d in doc["retrieved"]] == [("kb-1", 0.9, 1), ("kb-2", 0.5, 2)]
    assert doc["tokens"] == {"prompt": 77, "completion": 9} and doc["model"]["name"] == "gpt-4o-mini-2024"
    assert doc["retriever"]["name"] == "retrieval kb" and doc["attributes"]["session.id"] == "conv-7"
    assert doc["attributes"]["ragmon.otlp.conventions"] == "genai"
    assert doc["attributes"]["ragmon.otlp.unavailable"] == "text"  # the conventions carry ids and scores only


def test_genai_model_call_without_content_on_spans_keeps_tokens_and_model_and_names_what_is_missing():
    spans = genai_trace(json.dumps([{"id": "kb-1", "score": 0.9}]))
    bare = Span(TRACE, "3" * 8, "1" * 8, "chat gpt-4o-mini", 60, 800, {
        "gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o-mini", "gen_ai.usage.input_tokens": 12,
        "gen_ai.usage.output_tokens": 3}, "")  # openai-v2's default: message content goes to log events, not spans
    root = Span(TRACE, "1" * 8, "", "invoke_workflow", 0, 900, {"gen_ai.operation.name": "invoke_workflow"}, "")
    doc = build([canonical(root), spans[1], canonical(bare)])
    assert (doc["question"], doc["answer"]) == ("How are invoices sent?", "")  # the retrieval's query text
    assert doc["tokens"] == {"prompt": 12, "completion": 3} and doc["model"]["name"] == "gpt-4o-mini"
    assert doc["attributes"]["ragmon.otlp.unavailable"] == "answer,text"


def test_a_trace_may_mix_conventions():
    root = span("1", "", "rag", 0, 900, **{"openinference.span.kind": "CHAIN", "input.value": "How long?",
                                           "output.value": "Five days."})
    retriever = span("2", "1", "retrieve", 10, 50, **{
        "openinference.span.kind": "RETRIEVER", "retrieval.documents.0.document.id": "c1",
        "retrieval.documents.0.document.score": 0.7, "retrieval.documents.0.document.content": "Five days."})
    doc = build([root, retriever, chat("3", "1", 60, 800, "Five days.")])
    assert doc["tokens"] == {"prompt": 77, "completion": 9} and doc["model"]["name"] == "gpt-4o-mini-2024"
    assert doc["attributes"]["ragmon.otlp.conventions"] == "genai,openinference"
    assert [convention(s) for s in (root, retriever)] == ["openinference", "openinference"]


def test_openinference_and_unknown_spans_are_read_as_they_are():
    oi = Span(TRACE, "1" * 8, "", "x", 0, 1, {"openinference.span.kind": "LLM", "gen_ai.operation.name": "chat"}, "")
    plain = Span(TRACE, "2" * 8, "", "GET /", 0, 1, {"http.method": "GET"}, "")
    assert canonical(oi) is oi and canonical(plain) is plain and convention(plain) == ""


@pytest.mark.parametrize(("documents", "problem"), [
    ('[{"id": ["kb-1"], "score": 0.9}]', "document.id"),  # an array is not an id
])
def test_wrong_types_are_not_coerced(documents, problem):
    with pytest.raises(ValueError, match=problem):
        openinference.build(genai_trace(documents), incomplete=False)


def test_token_counts_of_the_wrong_type_are_not_coerced():
    with pytest.raises(ValueError, match="llm.token_count.prompt"):
        openinference.build(genai_trace("[]", **{"gen_ai.usage.input_tokens": "77"}), incomplete=False)


def test_retrieval_documents_that_are_not_json_give_a_retriever_without_documents():
    doc = build(genai_trace("[{not json"))
    assert doc["retrieved"] == [] and doc["retriever"]["name"] == "retrieval kb"


@pytest.mark.parametrize(("spans", "reason"), [
    # openai-v2 alone: a model call, not a query
    ([lambda: chat("1", "", 0, 10, "Hello.")], "llm_only"),
    # OpenLLMetry's LlamaIndex embedding: a workflow marked as embeddings, task spans below it
    ([lambda: span("1", "", "HashingEmbedding.workflow", 0, 10, **{
        "traceloop.span.kind": "workflow", "gen_ai.operation.name": "embeddings", "traceloop.entity.input": "{}"}),
      lambda: span("2", "1", "HashingEmbedding.task", 1, 9, **{"traceloop.span.kind": "task",
                                                               "traceloop.entity.input": '{"text": "x"}'})],
     "embedding_only"),
    # LangChain's chain without a retriever
    ([lambda: span("1", "", "RunnableSequence.workflow", 0, 10, **{
        "traceloop.span.kind": "workflow", "gen_ai.operation.name": "invoke_agent"}),
      lambda: chat("2", "1", 1, 9, "Hello.")], "no_retriever"),
])
def test_traces_without_retrieval_are_skipped_with_their_reason(spans, reason):
    assert openinference.build([make() for make in spans], incomplete=False).skipped == reason


def test_the_retriever_read_is_the_one_whose_documents_carry_ids_or_scores():
    """DSPy: ``Retrieve.forward`` (texts only) wraps the ``ColBERTv2.__call__`` that has ids and scores."""
    root = span("1", "", "RAG.forward", 0, 900, **{
        "openinference.span.kind": "CHAIN", "input.value": '{"question": "How long?"}',
        "input.mime_type": "application/json", "output.value": '{"answer": "Five days."}',
        "output.mime_type": "application/json"})
    outer = span("2", "1", "Retrieve.forward", 10, 100, **{
        "openinference.span.kind": "RETRIEVER", "retrieval.documents.0.document.content": "Refunds take five days."})
    inner = span("3", "2", "ColBERTv2.__call__", 20, 90, **{
        "openinference.span.kind": "RETRIEVER", "retrieval.documents.0.document.id": 11,
        "retrieval.documents.0.document.content": "Refunds take five days.",
        "retrieval.documents.0.document.score": 21.5})
    llm = span("4", "1", "LM.__call__", 200, 800, **{
        "openinference.span.kind": "LLM", "llm.model_name": "gpt-4o-mini",
        "llm.output_messages.0.message.content": "[[ ## answer ## ]]\nFive days.\n\n[[ ## completed ## ]]"})
    doc = build([root, outer, inner, llm])
    assert (doc["question"], doc["answer"]) == ("How long?", "Five days.")
    assert [(d["chunk_id"], d["score"]) for d in doc["retrieved"]] == [("11", 21.5)]
    assert doc["retriever"]["name"] == "ColBERTv2.__call__"
    assert doc["attributes"]["ragmon.otlp.unavailable"] == "tokens"


def raw(s: Span) -> Span:
    """The span as it arrives (the assembler reads each by its convention): only the instrumentation's attributes."""
    own = {k: v for k, v in s.attributes.items() if k.startswith(("traceloop.", "gen_ai."))}
    return Span(s.trace_id, s.span_id, s.parent_span_id, s.name, s.start_ns, s.end_ns, own, s.status_error)


def test_a_slow_openllmetry_query_waits_for_its_root_and_is_stored_whole_at_once():
    from ragmon.pipeline.offsets import OffsetLedger
    from ragmon.pipeline.spans.otlp_assembly import OtlpAssembler
    from ragmon.stream.source import RawMessage

    root, retriever, llm = (raw(s) for s in llamaindex_trace())
    assembler, ledger = OtlpAssembler(wait_seconds=10, max_pending=10, settle_seconds=2), OffsetLedger()
    assert assembler.add(RawMessage("t", 0, 0, b""), [retriever], ledger, now=0.0) == []
    assert assembler.expire(now=120.0) == [], "two minutes without the root: still waiting"
    (item,) = assembler.add(RawMessage("t", 0, 1, b""), [llm, root], ledger, now=120.0)
    assert item.outcome == "complete", "a retriever, an LLM call and the answer: stored at once"
    doc = json.loads(item.document or b"{}")
    assert [d["chunk_id"] for d in doc["retrieved"]] == ["n-refunds", "n-invoices"]
    assert doc["tokens"] == {"prompt": 77, "completion": 9}


def test_a_late_model_call_span_repairs_the_stored_openllmetry_query():
    from ragmon.pipeline.offsets import OffsetLedger
    from ragmon.pipeline.spans.otlp_assembly import OtlpAssembler
    from ragmon.stream.source import RawMessage

    root, retriever, llm = (raw(s) for s in llamaindex_trace())
    assembler = OtlpAssembler(wait_seconds=10, max_pending=10, settle_seconds=2, repair_seconds=60)
    ledger = OffsetLedger()
    assert assembler.add(RawMessage("t", 0, 0, b""), [retriever, root], ledger, now=0.0) == []
    (first,) = assembler.expire(now=2.0)  # settled without its LLM call
    stored = json.loads(first.document or b"{}")
    assert stored["attributes"]["ragmon.otlp.missing"] == "llm" and stored["tokens"] == {"prompt": 0, "completion": 0}
    (second,) = assembler.add(RawMessage("t", 0, 1, b""), [llm], ledger, now=30.0)
    repaired = json.loads(second.document or b"{}")
    assert second.outcome == "repaired" and repaired["attributes"]["ragmon.otlp.version"] == "2"
    assert "ragmon.otlp.incomplete" not in repaired["attributes"]
    assert repaired["tokens"] == {"prompt": 77, "completion": 9} and repaired["model"]["name"] == "gpt-4o-mini-2024"


_KEYS = ["gen_ai.operation.name", "gen_ai.output.messages", "gen_ai.input.messages", "gen_ai.retrieval.documents",
         "gen_ai.tool.call.arguments", "gen_ai.tool.call.result", "pydantic_ai.all_messages", "final_result",
         "gen_ai.retrieval.query.text", "gen_ai.usage.input_tokens", "gen_ai.response.model", "gen_ai.conversation.id",
         "traceloop.span.kind", "traceloop.entity.input", "traceloop.entity.output"]


def _json_texts() -> Any:
    from hypothesis import strategies as st

    leaves = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8)
    values = st.recursive(leaves, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
        st.sampled_from(["role", "parts", "content", "type", "id", "score", "text", "node", "id_", "nodes",
                         "documents", "page_content", "metadata"]), inner, max_size=4), max_leaves=12)
    return values.map(json.dumps) | st.sampled_from(["chat", "retrieval", "vector_db_retrieve", "workflow", "task",
                                                     "execute_tool", "invoke_agent",
                                                     "NodeWithScore", "[", "{"]) | leaves


def test_reading_a_span_never_raises_whatever_its_attributes_hold():
    from hypothesis import given, settings
    from hypothesis import strategies as st

    @settings(max_examples=300, deadline=None)
    @given(st.dictionaries(st.sampled_from(_KEYS), _json_texts(), max_size=6))
    def check(attrs: dict[str, Any]) -> None:
        read = canonical(Span(TRACE, "1" * 16, "", "s", 0, 1, attrs, ""))
        assert {k: read.attributes[k] for k in attrs} == attrs, "the span's own attributes are kept as they were"

    check()


# -- Pydantic AI's own instrumentation (pydantic-ai-slim 2.31, format version 5), values from a real agent run --------

TOOL_DOCS = [{"id": "kb-refunds", "score": 0.91, "text": "Refunds take five days.", "metadata": {"doc_id": "refunds"}},
             {"id": "kb-shipping", "score": 0.42, "text": "Shipping is free.", "metadata": {"doc_id": "shipping"}}]


def pydantic_ai_trace(result: Any = None, *, content: bool = True, **root_extra: Any) -> list[Span]:
    """An agent run: a model call that calls the tool, the tool, the model call that answers (every span carries the
    run's conversation id)."""
    result = json.dumps(TOOL_DOCS) if result is None else result
    ask = {"role": "user", "parts": [{"type": "text", "content": "How long do refunds take?"} if content
                                     else {"type": "text"}]}
    call = {"role": "assistant", "parts": [{"type": "tool_call", "id": "call_1", "name": "search_docs"}],
            "finish_reason": "tool_call"}
    back = {"role": "user", "parts": [{"type": "tool_call_response", "id": "call_1", "name": "search_docs"}]}
    said = {"role": "assistant", "parts": [{"type": "text", "content": "Five days."} if content else {"type": "text"}],
            "finish_reason": "stop"}
    run = {"gen_ai.agent.name": "support", "gen_ai.conversation.id": "conv-1"}

    def model_call(span_id: str, start: int, end: int, messages: list[Any], output: dict[str, Any]) -> Span:
        return span(span_id, "1", "chat gpt-4o-mini", start, end, **run, **{
            "gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai", "gen_ai.request.model": "gpt-4o-mini",
            "gen_ai.response.model": "gpt-4o-mini", "gen_ai.usage.input_tokens": 77, "gen_ai.usage.output_tokens": 9,
            "gen_ai.input.messages": json.dumps(messages), "gen_ai.output.messages": json.dumps([output]),
            "model_request_parameters": "{}", "operation.cost": 1.7e-05})

    tool = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search_docs", "gen_ai.tool.call.id": "call_1",
            "logfire.msg": "running tool: search_docs", **run}
    if content:
        tool.update({"gen_ai.tool.call.arguments": '{"query": "refunds"}', "gen_ai.tool.call.result": result})
    root = {"gen_ai.operation.name": "invoke_agent", "agent_name": "support", "model_name": "gpt-4o-mini",
            "logfire.msg": "support run", "gen_ai.aggregated_usage.input_tokens": 154,
            "gen_ai.aggregated_usage.output_tokens": 18,
            "pydantic_ai.all_messages": json.dumps([ask, call, back, said]), **run, **root_extra}
    if content:
        root["final_result"] = "Five days."
    return [span("1", "", "invoke_agent support", 0, 900, **root), model_call("2", 10, 100, [ask], call),
            span("3", "1", "execute_tool search_docs", 110, 150, **tool),
            model_call("4", 160, 800, [ask, call, back], said)]


def test_pydantic_ai_agent_run_with_a_retrieval_tool_is_a_query():
    doc = build(pydantic_ai_trace())
    assert (doc["question"], doc["answer"]) == ("How long do refunds take?", "Five days.")
    assert [(d["chunk_id"], d["score"], d["text"], d["doc_id"], d["rank"]) for d in doc["retrieved"]] == [
        ("kb-refunds", 0.91, "Refunds take five days.", "refunds", 1),
        ("kb-shipping", 0.42, "Shipping is free.", "shipping", 2)]
    # both model calls, once each (the run's aggregated usage is not counted again)
    assert doc["tokens"] == {"prompt": 154, "completion": 18} and doc["model"]["name"] == "gpt-4o-mini"
    assert doc["retriever"]["name"] == "execute_tool search_docs"
    assert doc["latency_ms"] == {"total": 0.0009, "retrieve": 0.00004, "generate": 0.00064}
    assert doc["attributes"]["session.id"] == "conv-1"
    assert doc["attributes"]["ragmon.otlp.conventions"] == "genai,pydantic_ai"
    assert "ragmon.otlp.unavailable" not in doc["attributes"] and "ragmon.otlp.incomplete" not in doc["attributes"]


def test_pydantic_ai_usage_on_the_run_under_its_standard_names_is_not_counted_twice():
    """``use_aggregated_usage_attribute_names=False``: the run carries the sum as ``gen_ai.usage.*``."""
    doc = build(pydantic_ai_trace(**{"gen_ai.usage.input_tokens": 154, "gen_ai.usage.output_tokens": 18}))
    assert doc["tokens"] == {"prompt": 154, "completion": 18}


def test_a_tool_result_without_texts_or_scores_is_stored_with_what_it_has_and_says_what_is_missing():
    doc = build(pydantic_ai_trace(json.dumps([{"id": "kb-refunds"}, {"id": "kb-shipping"}])))
    assert [(d["chunk_id"], d["score"]) for d in doc["retrieved"]] == [("kb-refunds", None), ("kb-shipping", None)]
    assert doc["attributes"]["ragmon.otlp.unavailable"] == "score,text"


@pytest.mark.parametrize("result", [
    '{"temperature": 21}',  # a tool that is not a retrieval
    '["Refunds take five days."]',  # texts without ids or scores
    '[{"id": "kb-1"}, "loose text"]',  # not every item a document
    "[]",
    "not json",
])
def test_a_tool_whose_result_is_not_documents_is_not_a_retrieval(result):
    assert openinference.build(pydantic_ai_trace(result), incomplete=False).skipped == "no_retriever"


def test_pydantic_ai_without_content_records_no_tool_result_and_its_run_is_skipped():
    """``include_content=False``: no arguments, no result, no message texts (only their types)."""
    spans = pydantic_ai_trace(content=False)
    assert "gen_ai.tool.call.result" not in spans[2].attributes
    assert openinference.build(spans, incomplete=False).skipped == "no_retriever"


def test_a_pydantic_ai_tool_document_id_of_the_wrong_type_is_not_coerced():
    with pytest.raises(ValueError, match="document.id"):
        openinference.build(pydantic_ai_trace('[{"id": ["kb-1"], "score": 0.9}]'), incomplete=False)


def test_a_pydantic_ai_run_without_final_result_answers_with_its_last_assistant_text():
    spans = pydantic_ai_trace()
    root = spans[0]
    attrs = {k: v for k, v in root.attributes.items() if k != "final_result"}
    spans[0] = canonical(Span(root.trace_id, root.span_id, "", root.name, root.start_ns, root.end_ns,
                              {k: v for k, v in attrs.items() if k.startswith(("gen_ai.", "pydantic_ai."))}, ""))
    assert build(spans)["answer"] == "Five days."
