"""Small RAG applications instrumented by OpenLLMetry (Traceloop's ``opentelemetry-instrumentation-llamaindex``,
``-langchain`` and ``-openai``) and by the OpenTelemetry GenAI conventions (``opentelemetry-instrumentation-openai-v2``
and ``opentelemetry-util-genai``'s handler; Pydantic AI's own instrumentation), all REAL, talking to a local
OpenAI-compatible server (``tests/support/openai_server.py``), exporting over OTLP/HTTP.

Instrumentations patch their frameworks (and the OpenAI client) globally, and OpenLLMetry's OpenAI one cannot be
undone (``uninstrument`` leaves its wrapper in place), so each family runs in its own process, apart from the
OpenInference tests (``tests/support/instrumented.py``) and from each other:
``python -m tests.support.conventions_app ENDPOINT[,ENDPOINT…] TOKEN FAMILY [options]`` (``openllmetry``,
``genai``, ``haystack``, ``dspy``, ``pydantic_ai``) runs that family's scenarios, exports its spans to every
ENDPOINT at once (a Collector's or ragmon's ``/v1/traces``; one ``BatchSpanProcessor`` each) and prints what the
applications saw, one JSON object per query (``Sent``), then ``{"skipped": {reason: count}}`` for the traces that
are not queries. Options, for the slow and late-span tests (``tests/integration/test_otlp_conventions_slow.py``):

- ``--single``: one query per framework and nothing else (no other scenario, no trace that is not a query); the
  families ``openllmetry_llamaindex`` and ``openllmetry_langchain`` run OpenLLMetry's two frameworks apart, so that
  two slow answers need not wait for each other;
- ``--answer-delay SECONDS``: the model takes that long over each final answer (not over Pydantic AI's tool-call
  step, nor a rerank call); the app prints ``{"asked": FAMILY}`` when the model has been asked for one;
- ``--hold-answer``: the span of each query's answering model call (its last LLM span) is held back when the
  query's root ends; the app exports everything else, prints ``{"holding": N}`` and sends the held spans only when
  a line arrives on its standard input: a span that arrives after its trace was stored;
- ``--stream``: OpenLLMetry's LlamaIndex query engine (``streaming=True``) and LangChain chain (``chain.stream``)
  stream their answers, as an application does.
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
#: per family, the traces that are not queries: LlamaIndex's index (a splitter trace, an embedding trace), an
#: embedding alone, a bare completion, LangChain's chain without a retriever; a bare openai-v2 chat call; a
#: Pydantic AI run that calls no retrieval tool
SKIPPED = {"openllmetry": {"embedding_only": 2, "llm_only": 1, "no_retriever": 2}, "genai": {"llm_only": 1},
           "haystack": {}, "dspy": {}, "pydantic_ai": {"no_retriever": 1}}
#: the Pydantic AI agent's retrieval tool (the model is told to call it once, then answers)
TOOL = "search_docs"


def _answer(request: dict, delay: float = 0.0, asked: Any = None) -> Any:
    """The model's reply to ``request``; a final answer takes ``delay`` seconds (``asked`` is called first)."""
    from tests.support.openai_server import ok

    messages = request.get("messages", [])
    if any(t.get("function", {}).get("name") == TOOL for t in request.get("tools", [])) and \
            not any(m.get("role") == "tool" for m in messages):  # Pydantic AI's agent: call its tool first
        question = [m["content"] for m in messages if m.get("role") == "user"][-1]
        return _tool_call(TOOL, {"query": question})
    prompt = json.dumps(request)  # the rerank schema may be in the messages or the response format
    text = RERANK if "document_number" in prompt else ANSWER
    if "[[ ## answer ## ]]" in prompt:  # DSPy's chat adapter: its field markers around the answer
        text = f"[[ ## answer ## ]]\n{ANSWER}\n\n[[ ## completed ## ]]"
    delay = 0.0 if text == RERANK else delay  # a final answer (the tool-call step returned above)
    if delay and asked is not None:
        asked()
    return ok(text, model=MODEL, prompt_tokens=PROMPT_TOKENS, completion_tokens=COMPLETION_TOKENS,
              delay_seconds=delay)


def _tool_call(name: str, arguments: dict[str, Any]) -> Any:
    """A chat completion whose message calls ``name`` (``FakeOpenAI`` writes text answers only)."""
    from tests.support.openai_server import Step

    message = {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}]}
    return Step(body=json.dumps({
        "id": "chatcmpl-tool", "object": "chat.completion", "created": 0, "model": MODEL,
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": message}],
        "usage": {"prompt_tokens": PROMPT_TOKENS, "completion_tokens": COMPLETION_TOKENS,
                  "total_tokens": PROMPT_TOKENS + COMPLETION_TOKENS}}).encode())


class Apps:
    """One process's applications (``provider``'s spans pass through ``tap``: nothing is exported while no processor
    is attached, so the expected retrievals are computed untraced)."""

    def __init__(self, base_url: str, endpoints: list[str], headers: dict[str, str], *, single: bool = False,
                 hold: bool = False, stream: bool = False) -> None:
        import os

        os.environ.setdefault("HAYSTACK_TELEMETRY_ENABLED", "False")
        os.environ.setdefault("OTEL_SEMCONV_STABILITY_OPT_IN", "gen_ai_latest_experimental")
        os.environ.setdefault("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "SPAN_ONLY")
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider

        from tests.support.instrumented import SpanTap

        self.base_url, self.endpoints, self.headers = base_url, endpoints, headers
        self.single, self.hold, self.stream = single, hold, stream
        self.provider = TracerProvider(resource=Resource.create({"service.name": "rag-app-conventions"}))
        self.tap = SpanTap()
        self.provider.add_span_processor(self.tap)

    def openllmetry(self, calls: Any, frameworks: str = "llamaindex,langchain") -> list[Sent]:
        from opentelemetry.instrumentation.langchain import LangchainInstrumentor
        from opentelemetry.instrumentation.llamaindex import LlamaIndexInstrumentor
        from opentelemetry.instrumentation.openai import OpenAIInstrumentor

        LlamaIndexInstrumentor().instrument(tracer_provider=self.provider)
        LangchainInstrumentor().instrument(tracer_provider=self.provider)
        OpenAIInstrumentor().instrument(tracer_provider=self.provider)
        return (self.llamaindex(calls) if "llamaindex" in frameworks else []) + \
            (self.langchain() if "langchain" in frameworks else [])

    def _index(self) -> Any:
        from llama_index.core import Document, Settings, VectorStoreIndex
        from llama_index.llms.openai import OpenAI

        from tests.support.llamaindex_app import _build

        embedding, _ = _build()
        Settings.llm = OpenAI(model=MODEL, api_base=self.base_url, api_key="test", max_retries=0, timeout=600)
        Settings.embed_model = embedding()
        return VectorStoreIndex.from_documents(
            [Document(text=text, doc_id=name, metadata={"doc_id": name, "doc_version": "3"})
             for name, text in CORPUS.items()])

    # -- OpenLLMetry: LlamaIndex -----------------------------------------------------------------------------------

    def llamaindex(self, calls: Any) -> list[Sent]:
        from llama_index.core import Document, Settings, VectorStoreIndex
        from llama_index.core.postprocessor import StructuredLLMRerank

        index = self._index()

        def expected(question: str, k: int) -> tuple[list[str], list[float | None], list[str]]:
            nodes = index.as_retriever(similarity_top_k=k).retrieve(question)  # untraced: no processor attached
            return [n.node.node_id for n in nodes], [n.score for n in nodes], [n.node.get_content() for n in nodes]

        plans = [("How long do refunds take?", 2, "compact", False), ("Where are invoices sent?", 3, "refine", False),
                 ("Is shipping free?", 3, "compact", True)][:1 if self.single else 3]
        wanted = [expected(q, k) for q, k, _, _ in plans]
        sent = []
        with self.exporting():
            for (question, k, mode, rerank), (ids, scores, texts) in zip(plans, wanted, strict=True):
                before = calls()
                post = [StructuredLLMRerank(top_n=2, choice_batch_size=k)] if rerank else []
                response = index.as_query_engine(similarity_top_k=k, response_mode=mode, streaming=self.stream,
                                                 node_postprocessors=post).query(question)
                answer = "".join(response.response_gen) if self.stream else str(response)
                n = calls() - before
                context = [s.node.node_id for s in response.source_nodes] if rerank else []
                sent.append(Sent(question, answer, ids, scores, texts, context, n * PROMPT_TOKENS,
                                 n * COMPLETION_TOKENS, MODEL))
            if self.single:
                return sent
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
            answer = "".join(chain.stream(question)) if self.stream else chain.invoke(question)
            if not self.single:
                (prompt | model | StrOutputParser()).invoke({"context": "", "question": "Say hello."})
        # OpenLLMetry records neither the documents' ids nor their scores: ragmon derives ids from the content. A
        # stream has no usage: ChatOpenAI asks for it (stream_usage) by default only from OpenAI's own base URL
        tokens = (0, 0) if self.stream else (PROMPT_TOKENS, COMPLETION_TOKENS)
        return [Sent(question, answer, [d.id or "" for d in docs], [None] * len(docs), [d.page_content for d in docs],
                     [], *tokens, MODEL)]

    # -- the GenAI semantic conventions: openai-v2 and a retrieval span of the application's own ------------------

    def genai(self) -> list[Sent]:
        import openai
        from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor
        from opentelemetry.util.genai.handler import TelemetryHandler
        from opentelemetry.util.genai.types import InputMessage, OutputMessage, Text

        OpenAIInstrumentor().instrument(tracer_provider=self.provider)
        handler = TelemetryHandler(tracer_provider=self.provider)
        client = openai.OpenAI(base_url=self.base_url, api_key="test", max_retries=0)
        question = "How are invoices sent?"
        nodes = self._index().as_retriever(similarity_top_k=2).retrieve(question)  # LlamaIndex not instrumented
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
            if not self.single:
                client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Say hello."}])
        # the conventions carry ids and scores, not the documents' texts
        return [Sent(question, answer, ids, scores, [], [], PROMPT_TOKENS, COMPLETION_TOKENS, MODEL)]

    # -- OpenInference for Haystack ------------------------------------------------------------------------------

    def haystack(self) -> list[Sent]:
        from haystack import Document, Pipeline
        from haystack.components.builders import ChatPromptBuilder
        from haystack.components.generators.chat import OpenAIChatGenerator
        from haystack.components.retrievers.in_memory import InMemoryBM25Retriever
        from haystack.dataclasses import ChatMessage
        from haystack.document_stores.in_memory import InMemoryDocumentStore
        from haystack.utils import Secret
        from openinference.instrumentation.haystack import HaystackInstrumentor

        HaystackInstrumentor().instrument(tracer_provider=self.provider)
        store = InMemoryDocumentStore()
        store.write_documents([Document(id=f"hs-{name}", content=text, meta={"doc_id": name})
                               for name, text in CORPUS.items()])
        retriever = InMemoryBM25Retriever(document_store=store, top_k=2)
        pipeline = Pipeline()
        pipeline.add_component("retriever", retriever)
        pipeline.add_component("prompt", ChatPromptBuilder(
            template=[ChatMessage.from_user("Context: {% for d in documents %}{{ d.content }} {% endfor %}\n"
                                            "Question: {{ question }}")], required_variables=["documents", "question"]))
        pipeline.add_component("llm", OpenAIChatGenerator(api_key=Secret.from_token("test"), model=MODEL,
                                                          api_base_url=self.base_url, max_retries=0,
                                                          timeout=600))
        pipeline.connect("retriever.documents", "prompt.documents")
        pipeline.connect("prompt.prompt", "llm.messages")
        question = "Are invoices sent by email once the order has shipped?"
        docs = retriever.run(query=question)["documents"]  # untraced
        with self.exporting():
            out = pipeline.run({"retriever": {"query": question}, "prompt": {"question": question}})
        return [Sent(question, out["llm"]["replies"][0].text or "", [d.id for d in docs], [d.score for d in docs],
                     [d.content or "" for d in docs], [], PROMPT_TOKENS, COMPLETION_TOKENS, MODEL)]

    # -- OpenInference for DSPy: a retrieve-then-predict module, a ColBERTv2 retriever model -------------------------

    def dspy(self) -> list[Sent]:
        import atexit
        import os
        import shutil
        import tempfile

        cache = tempfile.mkdtemp(prefix="dspy-cache-")  # never the home directory
        atexit.register(shutil.rmtree, cache, True)
        os.environ.setdefault("DSPY_CACHEDIR", cache)
        os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # the packaged model map: no download
        import dspy
        from openinference.instrumentation.dspy import DSPyInstrumentor

        DSPyInstrumentor().instrument(tracer_provider=self.provider)
        dspy.configure_cache(enable_disk_cache=False, enable_memory_cache=False)
        lm = dspy.LM(f"openai/{MODEL}", api_base=self.base_url, api_key="test", num_retries=0, cache=False)
        with ColBERTServer() as colbert:
            dspy.configure(lm=lm, rm=dspy.ColBERTv2(url=colbert.url))

            class RAG(dspy.Module):
                def __init__(self) -> None:
                    super().__init__()
                    self.retrieve = dspy.Retrieve(k=2)
                    self.generate = dspy.Predict("context, question -> answer")

                def forward(self, question: str) -> Any:
                    return self.generate(context=self.retrieve(question).passages, question=question)

            question = "How long until a refund arrives?"
            with self.exporting():
                answer = RAG()(question=question).answer
            topk = colbert.topk(question, 2)
        # DSPy's instrumentation records no token counts
        return [Sent(question, answer, [str(d["pid"]) for d in topk], [d["score"] for d in topk],
                     [d["text"] for d in topk], [], 0, 0, MODEL)]

    # -- Pydantic AI's own instrumentation: an agent with a retrieval tool -----------------------------------------

    def pydantic_ai(self, calls: Any) -> list[Sent]:
        from pydantic_ai import Agent
        from pydantic_ai.capabilities.instrumentation import Instrumentation
        from pydantic_ai.models.instrumented import InstrumentationSettings
        from pydantic_ai.models.openai import OpenAIChatModel
        from pydantic_ai.providers.openai import OpenAIProvider

        model = OpenAIChatModel(MODEL, provider=OpenAIProvider(base_url=self.base_url, api_key="test"))
        traced = [Instrumentation(settings=InstrumentationSettings(tracer_provider=self.provider))]
        agent = Agent(model, name="support", instructions="Answer from the documents.", capabilities=traced)

        def search_docs(query: str) -> list[dict[str, Any]]:
            """Search the knowledge base: the best documents first, with their ids and scores."""
            names = list(CORPUS)  # ranked by shared words, as the ColBERT endpoint below ranks them
            return [{"id": f"kb-{names[d['pid']]}", "score": d["score"], "text": d["text"],
                     "metadata": {"doc_id": names[d["pid"]]}} for d in ColBERTServer.topk(query, 2)]

        agent.tool_plain(name=TOOL)(search_docs)
        plain = Agent(model, name="greeter", capabilities=traced)  # no tool: no retrieval, not a query
        question = "How long do refunds take after the parcel arrives?"
        docs = search_docs(question)
        with self.exporting():
            before = calls()
            answer = agent.run_sync(question, conversation_id="conv-pydantic-ai").output
            n = calls() - before
            if not self.single:
                plain.run_sync("Say hello.")
        # a retrieval tool's result is the documents: ids, scores, texts and metadata as the tool returned them
        return [Sent(question, answer, [d["id"] for d in docs], [d["score"] for d in docs], [d["text"] for d in docs],
                     [], n * PROMPT_TOKENS, n * COMPLETION_TOKENS, MODEL, session_id="conv-pydantic-ai")]

    def exporting(self) -> Any:
        """Export every span that ends inside the block to every endpoint (one batch processor each); with
        ``hold``, through ``HoldAnswer``: the held spans go once a line arrives on standard input."""
        from contextlib import contextmanager

        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        @contextmanager
        def block() -> Any:
            processors = [BatchSpanProcessor(OTLPSpanExporter(endpoint=e, headers=self.headers or None),
                                             schedule_delay_millis=200) for e in self.endpoints]
            hold = HoldAnswer(processors) if self.hold else None
            for processor in [hold] if hold else processors:
                self.tap.attach(processor)
            try:
                yield
            finally:
                for processor in [hold] if hold else processors:
                    self.tap.detach(processor)
                if hold is not None:
                    for processor in processors:
                        processor.force_flush()  # every span but the held ones is on its way
                    print(json.dumps({"holding": hold.holding()}), flush=True)
                    sys.stdin.readline()
                    hold.release()
                for processor in processors:
                    processor.force_flush()
                    processor.shutdown()

        return block()


def _is_llm_call(span: Any) -> bool:
    attributes = span.attributes or {}
    return attributes.get("openinference.span.kind") == "LLM" or \
        attributes.get("gen_ai.operation.name") in ("chat", "text_completion", "generate_content")


class HoldAnswer:
    """A span processor in front of ``targets`` that holds back each trace's answering model call: the LLM spans
    of a trace wait for its root; when the root ends it goes on with every LLM span but the one that ended last (the
    answer's), which waits for ``release()``."""

    def __init__(self, targets: list[Any]) -> None:
        import threading

        self.targets = targets
        self._waiting: dict[int, list[Any]] = {}  # trace id → its LLM spans, until its root ends
        self._held: list[Any] = []
        self._lock = threading.Lock()

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        for t in self.targets:
            t.on_start(span, parent_context)

    def on_end(self, span: Any) -> None:
        trace_id = span.context.trace_id
        with self._lock:
            if span.parent is not None and _is_llm_call(span):
                self._waiting.setdefault(trace_id, []).append(span)
                return
            send = [span]
            if span.parent is None and self._waiting.get(trace_id):
                calls = sorted(self._waiting.pop(trace_id), key=lambda s: s.end_time)
                self._held.append(calls.pop())
                send += calls
        for s in send:
            for t in self.targets:
                t.on_end(s)

    def holding(self) -> int:
        with self._lock:
            assert not self._waiting, "an LLM span whose root never ended"
            return len(self._held)

    def release(self) -> None:
        with self._lock:
            held, self._held = self._held, []
        for s in held:
            for t in self.targets:
                t.on_end(s)

    def shutdown(self) -> None:
        pass

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return True


class ColBERTServer:
    """A local ColBERTv2-compatible search endpoint (``GET ?query=…&k=…`` → ``{"topk": [{"pid", "text", "score"}]}``,
    the protocol ``dspy.ColBERTv2`` speaks), ranking the corpus by shared words."""

    def __init__(self) -> None:
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
        from urllib.parse import parse_qs, urlparse

        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802 - http.server's naming
                query = parse_qs(urlparse(self.path).query)
                body = json.dumps({"topk": server.topk(query["query"][0], int(query["k"][0]))}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/api/search"

    @staticmethod
    def topk(query: str, k: int) -> list[dict[str, Any]]:
        words = set(query.lower().strip("?").split())
        ranked = sorted(((len(words & set(text.lower().strip(".").split())) + 1 / (pid + 2), pid, text)
                         for pid, text in enumerate(CORPUS.values())), reverse=True)
        return [{"pid": pid, "text": text, "score": round(score, 4)} for score, pid, text in ranked[:k]]

    def __enter__(self) -> ColBERTServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()


def main() -> None:
    """``ENDPOINT[,ENDPOINT…] TOKEN FAMILY [--single] [--answer-delay S] [--hold-answer]``: run the family's
    scenarios, export to every ENDPOINT, print what was sent (see the module docstring)."""
    import argparse
    import functools

    from tests.support.openai_server import FakeOpenAI

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("endpoints")
    parser.add_argument("token")
    parser.add_argument("family", choices=[*SKIPPED, "openllmetry_llamaindex", "openllmetry_langchain"])
    parser.add_argument("--single", action="store_true", help="one query per framework, nothing else")
    parser.add_argument("--answer-delay", type=float, default=0.0, metavar="SECONDS",
                        help="how long the model takes over each final answer")
    parser.add_argument("--hold-answer", action="store_true",
                        help="hold back each query's answering LLM span until a line arrives on standard input")
    parser.add_argument("--stream", action="store_true", help="OpenLLMetry's frameworks stream their answers")
    args = parser.parse_args()
    family, _, frameworks = args.family.partition("_") if args.family.startswith("openllmetry_") else \
        (args.family, "", "")
    asked = lambda: print(json.dumps({"asked": args.family}), flush=True)  # noqa: E731
    with FakeOpenAI(responder=functools.partial(_answer, delay=args.answer_delay, asked=asked)) as server:
        apps = Apps(server.base_url, args.endpoints.split(","),
                    {"Authorization": f"Bearer {args.token}"} if args.token else {}, single=args.single,
                    hold=args.hold_answer, stream=args.stream)
        calls = lambda: len(server.requests)  # noqa: E731
        sent = {"openllmetry": lambda: apps.openllmetry(calls, frameworks or "llamaindex,langchain"),
                "genai": apps.genai, "haystack": apps.haystack, "dspy": apps.dspy,
                "pydantic_ai": lambda: apps.pydantic_ai(calls)}[family]()
    for s in sent:
        print(json.dumps({"source": family, **asdict(s)}), flush=True)
    print(json.dumps({"skipped": {} if args.single else SKIPPED[family]}), flush=True)


if __name__ == "__main__":
    main()
