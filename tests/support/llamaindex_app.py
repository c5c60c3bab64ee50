"""A tiny in-process RAG application on the REAL llama-index-core, instrumented by the REAL OpenInference
instrumentation (``tests/support/instrumented.py``), with no model and no download.

The LLM is a ``CustomLLM`` that answers from fixed text and reports token usage the way OpenAI-compatible clients
do (``raw["usage"]``), which is where the instrumentation reads counts; it also answers the reranker's JSON prompt.
The embedding is a hashing bag of words (``BaseEmbedding``), so retrieval and its scores are deterministic.
``App`` runs each scenario of issue 18 and returns what the application itself saw (``Sent``): the question, the
nodes and scores, the answer, the token counts of every LLM call, so a test can compare ragmon's row with it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tests.support.instrumented import tap

ANSWER = "Refunds take five days after the parcel arrives."
MODEL = "fake-llm-1"
CORPUS = {
    "refunds": "Refunds take five days after the parcel arrives back at the warehouse.",
    "shipping": "Shipping is free for orders over fifty euros within the union.",
    "passwords": "Passwords are reset with the email link on the sign-in page.",
    "invoices": "Invoices are sent by email once the order has shipped.",
}


@dataclass
class Sent:
    """What the application saw for one query: compared field by field with the stored row."""

    question: str
    answer: str
    chunk_ids: list[str]
    scores: list[float | None]
    texts: list[str]
    context: list[str] = field(default_factory=list)  # the reranked list the model saw ([] without a reranker)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    model: str = MODEL
    session_id: str = ""


def _build() -> Any:
    from llama_index.core.embeddings import BaseEmbedding
    from llama_index.core.llms import CompletionResponse, CustomLLM, LLMMetadata
    from llama_index.core.llms.callbacks import llm_completion_callback

    class HashingEmbedding(BaseEmbedding):
        """Bag of words hashed into 64 buckets, L2-normalised: deterministic similarity, no model."""

        def _vector(self, text: str) -> list[float]:
            v = [0.0] * 64
            for word in text.lower().replace(".", " ").replace("?", " ").split():
                v[int(hashlib.blake2b(word.encode(), digest_size=4).hexdigest(), 16) % 64] += 1.0
            norm = sum(x * x for x in v) ** 0.5 or 1.0
            return [x / norm for x in v]

        def _get_query_embedding(self, query: str) -> list[float]:
            return self._vector(query)

        async def _aget_query_embedding(self, query: str) -> list[float]:
            return self._vector(query)

        def _get_text_embedding(self, text: str) -> list[float]:
            return self._vector(text)

    class FakeLLM(CustomLLM):
        """Answers from fixed text; usage as an OpenAI-compatible client reports it; every call recorded. ``thinking``,
        when set, is called before each answer: a slow model (it sleeps), or one that never answers (it blocks)."""

        calls: list[tuple[int, int]] = []
        thinking: Any = None

        @property
        def metadata(self) -> LLMMetadata:
            return LLMMetadata(model_name=MODEL, num_output=32, context_window=4096)

        def _text(self, prompt: str) -> str:
            if "document_number" in prompt:  # StructuredLLMRerank's JSON prompt: documents 3 then 1 (1-based)
                return '{"documents": [{"document_number": 3, "relevance": 9}, {"document_number": 1, "relevance": 4}]}'
            return ANSWER

        def _usage(self, prompt: str, text: str) -> dict[str, Any]:
            return {"usage": {"prompt_tokens": len(prompt.split()), "completion_tokens": len(text.split())}}

        @llm_completion_callback()
        def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
            if self.thinking is not None:
                self.thinking()
            text = self._text(prompt)
            self.calls.append((len(prompt.split()), len(text.split())))
            return CompletionResponse(text=text, raw=self._usage(prompt, text))

        @llm_completion_callback()
        def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> Any:
            text = self._text(prompt)
            self.calls.append((len(prompt.split()), len(text.split())))
            sofar = ""
            for word in text.split(" "):
                delta = (" " if sofar else "") + word
                sofar += delta
                yield CompletionResponse(text=sofar, delta=delta, raw=self._usage(prompt, sofar))

    return HashingEmbedding, FakeLLM


class App:
    """The indexed corpus and the scenarios. Build it once per test module: indexing is itself traced (two
    traces that are not queries)."""

    def __init__(self) -> None:
        tap()  # instrument before the first llama_index import patches anything
        from llama_index.core import Document, Settings, VectorStoreIndex

        embedding, llm = _build()
        self.llm = llm()
        Settings.llm = self.llm
        Settings.embed_model = embedding()
        docs = [Document(text=text, doc_id=name, metadata={"doc_id": name, "doc_version": "3"})
                for name, text in CORPUS.items()]
        self.index = VectorStoreIndex.from_documents(docs)

    def _retrieved(self, question: str, k: int) -> tuple[list[str], list[float | None], list[str]]:
        from openinference.instrumentation import suppress_tracing

        with suppress_tracing():  # what the retriever returns, without a trace of its own
            nodes = self.index.as_retriever(similarity_top_k=k).retrieve(question)
        return [n.node.node_id for n in nodes], [n.score for n in nodes], [n.node.get_content() for n in nodes]

    def _tokens(self, start: int) -> tuple[int, int]:
        calls = self.llm.calls[start:]
        return sum(p for p, _ in calls), sum(c for _, c in calls)

    def query(self, question: str, *, k: int = 2, response_mode: str = "compact") -> Sent:
        ids, scores, texts = self._retrieved(question, k)
        start = len(self.llm.calls)
        response = self.index.as_query_engine(similarity_top_k=k, response_mode=response_mode).query(question)
        return Sent(question, str(response), ids, scores, texts, [], *self._tokens(start))

    def query_slowly(self, question: str, thinking: Callable[[], None], *, k: int = 2) -> Sent:
        """``query`` with a model that calls ``thinking`` before it answers: its retriever's spans end (and an
        exporter sends them) long before the LLM's and the root's."""
        self.llm.thinking = thinking
        try:
            return self.query(question, k=k)
        finally:
            self.llm.thinking = None

    def query_streaming(self, question: str, *, k: int = 2) -> Sent:
        ids, scores, texts = self._retrieved(question, k)
        start = len(self.llm.calls)
        response = self.index.as_query_engine(similarity_top_k=k, streaming=True).query(question)
        answer = "".join(response.response_gen)
        return Sent(question, answer, ids, scores, texts, [], *self._tokens(start))

    def query_reranked(self, question: str, *, k: int = 3, top_n: int = 2) -> Sent:
        from llama_index.core.postprocessor import StructuredLLMRerank

        ids, scores, texts = self._retrieved(question, k)
        start = len(self.llm.calls)
        engine = self.index.as_query_engine(
            similarity_top_k=k, node_postprocessors=[StructuredLLMRerank(top_n=top_n, choice_batch_size=k)])
        response = engine.query(question)
        context = [n.node.node_id for n in response.source_nodes]
        return Sent(question, str(response), ids, scores, texts, context, *self._tokens(start))

    def chat(self, session_id: str, messages: list[str], *, k: int = 2) -> list[Sent]:
        from openinference.instrumentation import using_session

        engine = self.index.as_chat_engine(chat_mode="condense_plus_context", similarity_top_k=k)
        out = []
        with using_session(session_id):
            for message in messages:
                start = len(self.llm.calls)
                response = engine.chat(message)
                ids = [n.node.node_id for n in response.source_nodes]
                scores = [n.score for n in response.source_nodes]
                texts = [n.node.get_content() for n in response.source_nodes]
                out.append(Sent(message, str(response), ids, scores, texts, [], *self._tokens(start),
                                session_id=session_id))
        return out

    def not_queries(self) -> None:
        """Traces that are not RAG queries: an index built, an embedding alone, a bare completion."""
        from llama_index.core import Document, VectorStoreIndex

        VectorStoreIndex.from_documents([Document(text="A note that is indexed and never asked about.")])
        self.index._embed_model.get_text_embedding("embedding only")  # noqa: SLF001 - the app's own model
        self.llm.complete("Say hello.")
