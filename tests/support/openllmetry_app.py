"""Small RAG applications instrumented by OpenLLMetry (Traceloop's ``opentelemetry-instrumentation-llamaindex``,
``-langchain`` and ``-openai``) and by the OpenTelemetry GenAI conventions (``opentelemetry-instrumentation-openai-v2``
and ``opentelemetry-util-genai``'s handler), all REAL, talking to a local OpenAI-compatible server
(``tests/support/openai_server.py``), exporting over OTLP/HTTP.

They patch the same frameworks as the OpenInference instrumentations (``tests/support/instrumented.py``), globally,
so they run in their own process: ``python -m tests.support.openllmetry_app ENDPOINT`` runs every scenario, exports
its spans to ENDPOINT (a Collector's or ragmon's ``/v1/traces``) and prints what the applications saw, one JSON
object per query (``Sent``), then ``{"skipped": {reason: count}}`` for the traces that are not queries.
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict
from typing import Any

from tests.support.llamaindex_app import CORPUS, Sent

MODEL = "gpt-4o-mini"
ANSWER = "Refunds take five days."
PROMPT_TOKENS, COMPLETION_TOKENS = 77, 9
RERANK = '{"documents": [{"document_number": 3, "relevance": 9}, {"document_number": 1, "relevance": 4}]}'
#: the traces of ``main`` that are not queries: LlamaIndex's index (a splitter trace, an embedding trace), an
#: embedding alone, a bare completion; LangChain's chain without a retriever; a bare openai-v2 chat call
SKIPPED = {"embedding_only": 2, "llm_only": 2, "no_retriever": 2}


def _answer(request: dict) -> Any:
    from tests.support.openai_server import ok

    prompt = json.dumps(request)  # the rerank schema may be in the messages or the response format
    text = RERANK if "document_number" in prompt else ANSWER
    return ok(text, model=MODEL, prompt_tokens=PROMPT_TOKENS, completion_tokens=COMPLETION_TOKENS)


class Apps:
    """Instrumented once (``provider``'s spans pass through ``tap``: nothing is exported while no processor is
    attached, so the expected retrievals are computed untraced)."""

    def __init__(self, base_url: str) -> None:
        import os

        os.environ.setdefault("OTEL_SEMCONV_STABILITY_OPT_IN", "gen_ai_latest_experimental")
        os.environ.setdefault("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "SPAN_ONLY")
        from opentelemetry.instrumentation.langchain import LangchainInstrumentor
        from opentelemetry.instrumentation.llamaindex import LlamaIndexInstrumentor
        from opentelemetry.instrumentation.openai import OpenAIInstrumentor
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider

        from tests.support.instrumented import SpanTap

        self.base_url = base_url
        self.provider = TracerProvider(resource=Resource.create({"service.name": "rag-app-openllmetry"}))
        self.tap = SpanTap()
        self.provider.add_span_processor(self.tap)
        LlamaIndexInstrumentor().instrument(tracer_provider=self.provider)
        LangchainInstrumentor().instrument(tracer_provider=self.provider)
        OpenAIInstrumentor().instrument(tracer_provider=self.provider)

    # -- OpenLLMetry: LlamaIndex -----------------------------------------------------------------------------------

    def llamaindex(self, calls: Any) -> list[Sent]:
        from llama_index.core import Document, Settings, VectorStoreIndex
        from llama_index.core.postprocessor import StructuredLLMRerank
        from llama_index.llms.openai import OpenAI

        from tests.support.llamaindex_app import _build

        embedding, _ = _build()
        Settings.llm = OpenAI(model=MODEL, api_base=self.base_url, api_key="test", max_retries=0)
        Settings.embed_model = embedding()
        index = VectorStoreIndex.from_documents(
            [Document(text=text, doc_id=name, metadata={"doc_id": name, "doc_version": "3"})
             for name, text in CORPUS.items()])
        self.index = index

        def expected(question: str, k: int) -> tuple[list[str], list[float | None], list[str]]:
            nodes = index.as_retriever(similarity_top_k=k).retrieve(question)  # untraced: no processor attached
            return [n.node.node_id for n in nodes], [n.score for n in nodes], [n.node.get_content() for n in nodes]

        plans = [("How long do refunds take?", 2, "compact", False), ("Where are invoices sent?", 3, "refine", False),
                 ("Is shipping free?", 3, "compact", True)]
        wanted = [expected(q, k) for q, k, _, _ in plans]
        sent = []
        with self.exporting():
            for (question, k, mode, rerank), (ids, scores, texts) in zip(plans, wanted, strict=True):
                before = calls()
                post = [StructuredLLMRerank(top_n=2, choice_batch_size=k)] if rerank else []
                response = index.as_query_engine(similarity_top_k=k, response_mode=mode,
                                                 node_postprocessors=post).query(question)
                n = calls() - before
                context = [s.node.node_id for s in response.source_nodes] if rerank else []
                sent.append(Sent(question, str(response), ids, scores, texts, context, n * PROMPT_TOKENS,
                                 n * COMPLETION_TOKENS, MODEL))
            chat = index.as_chat_engine(chat_mode="condense_plus_context", similarity_top_k=2)
            for message in ("Can I get a refund?", "And how are passwords reset?"):  # the second condenses first
                before = calls()
                response = chat.chat(message)
                n = calls() - before
                nodes = response.source_nodes
                sent.append(Sent(message, str(response), [x.node.node_id for x in nodes], [x.score for x in nodes],
                                 [x.node.get_content() for x in nodes], [], n * PROMPT_TOKENS, n * COMPLETION_TOKENS,
                                 MODEL))
            # not queries: an index built (a splitter trace, an embedding trace), an embedding alone, a completion
            VectorStoreIndex.from_documents([Document(text="A note that is indexed and never asked about.")])
            Settings.embed_model.get_text_embedding("embedding only")
            Settings.llm.complete("Say hello.")
        return sent

    # -- OpenLLMetry: LangChain ------------------------------------------------------------------------------------

    def langchain(self) -> list[Sent]:
        from langchain_core.documents import Document
        from langchain_core.embeddings import DeterministicFakeEmbedding
        from langchain_core.output_parsers import StrOutputParser
        from langchain_core.prompts import ChatPromptTemplate
        from langchain_core.runnables import RunnablePassthrough
        from langchain_core.vectorstores import InMemoryVectorStore
        from langchain_openai import ChatOpenAI

        store = InMemoryVectorStore(DeterministicFakeEmbedding(size=32))
        store.add_documents([Document(page_content=text, metadata={"doc_id": name}, id=f"lc-{name}")
                             for name, text in CORPUS.items()])
        retriever = store.as_retriever(search_kwargs={"k": 2})
        prompt = ChatPromptTemplate.from_template("Answer from the context.\nContext: {context}\nQuestion: {question}")
        model = ChatOpenAI(model=MODEL, base_url=self.base_url, api_key="test", max_retries=0)
        join: Any = lambda docs: "\n".join(d.page_content for d in docs)  # noqa: E731
        chain = {"context": retriever | join, "question": RunnablePassthrough()} | prompt | model | StrOutputParser()
        question = "Is shipping free over fifty euros?"
        docs = retriever.invoke(question)  # untraced
        with self.exporting():
            answer = chain.invoke(question)
            (prompt | model | StrOutputParser()).invoke({"context": "", "question": "Say hello."})
        # OpenLLMetry records neither the documents' ids nor their scores: ragmon derives ids from the content
        return [Sent(question, answer, [d.id or "" for d in docs], [None] * len(docs), [d.page_content for d in docs],
                     [], PROMPT_TOKENS, COMPLETION_TOKENS, MODEL)]

    # -- the GenAI semantic conventions: openai-v2 and a retrieval span of the application's own ------------------

    def genai(self) -> list[Sent]:
        import openai
        from opentelemetry.instrumentation.openai import OpenAIInstrumentor
        from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor as OpenAIv2Instrumentor
        from opentelemetry.util.genai.handler import TelemetryHandler
        from opentelemetry.util.genai.types import InputMessage, OutputMessage, Text

        OpenAIInstrumentor().uninstrument()  # one OpenAI instrumentation at a time: now the official one
        OpenAIv2Instrumentor().instrument(tracer_provider=self.provider)
        handler = TelemetryHandler(tracer_provider=self.provider)
        client = openai.OpenAI(base_url=self.base_url, api_key="test", max_retries=0)
        question = "How are invoices sent?"
        nodes = self.index.as_retriever(similarity_top_k=2).retrieve(question)
        ids, scores, texts = [n.node.node_id for n in nodes], [n.score for n in nodes], [n.node.get_content()
                                                                                          for n in nodes]
        with self.exporting():
            with handler.workflow("support-rag") as workflow:
                workflow.input_messages = [InputMessage(role="user", parts=[Text(content=question)])]
                with handler.retrieval(data_source_id="kb") as retrieval:
                    retrieval.query_text = question
                    retrieval.documents = [{"id": i, "score": s} for i, s in zip(ids, scores, strict=True)]
                answer = client.chat.completions.create(model=MODEL, messages=[
                    {"role": "system", "content": "\n".join(texts)}, {"role": "user", "content": question}],
                ).choices[0].message.content or ""
                workflow.output_messages = [OutputMessage(role="assistant", parts=[Text(content=answer)],
                                                          finish_reason="stop")]
            client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Say hello."}])
        # the conventions carry ids and scores, not the documents' texts
        return [Sent(question, answer, ids, scores, [], [], PROMPT_TOKENS, COMPLETION_TOKENS, MODEL)]

    def exporting(self) -> Any:
        from contextlib import contextmanager

        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        @contextmanager
        def block() -> Any:
            processor = BatchSpanProcessor(OTLPSpanExporter(endpoint=self.endpoint, headers=self.headers),
                                           schedule_delay_millis=200)
            self.tap.attach(processor)
            try:
                yield
            finally:
                self.tap.detach(processor)
                processor.force_flush()
                processor.shutdown()

        return block()

    endpoint = ""
    headers: dict[str, str] = {}


def main() -> None:
    """``ENDPOINT [TOKEN]``: run every scenario, export to ENDPOINT, print what was sent."""
    from tests.support.openai_server import FakeOpenAI

    with FakeOpenAI(responder=_answer) as server:
        apps = Apps(server.base_url)
        apps.endpoint = sys.argv[1]
        if len(sys.argv) > 2:
            apps.headers = {"Authorization": f"Bearer {sys.argv[2]}"}
        calls = lambda: len(server.requests)  # noqa: E731
        sent = {"llamaindex": apps.llamaindex(calls), "langchain": apps.langchain(), "genai": apps.genai()}
    for source, queries in sent.items():
        for s in queries:
            print(json.dumps({"source": source, **asdict(s)}), flush=True)
    print(json.dumps({"skipped": SKIPPED}), flush=True)


if __name__ == "__main__":
    main()
