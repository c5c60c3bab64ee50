"""A tiny in-process RAG chain on the REAL langchain-core, instrumented by the REAL OpenInference instrumentation
(``tests/support/instrumented.py``): an in-memory vector store over the framework's deterministic fake embedding,
a prompt, the framework's fake chat model. Its retriever returns documents without scores (as LangChain's
``VectorStoreRetriever`` does), which is what issue 18's first problem is about.
"""

from __future__ import annotations

from typing import Any

from tests.support.instrumented import tap
from tests.support.llamaindex_app import CORPUS, Sent

ANSWER = "Shipping is free over fifty euros."


def _without_ids(store: Any) -> Any:
    from langchain_core.documents import Document
    from langchain_core.retrievers import BaseRetriever

    class Unidentified(BaseRetriever):
        def _get_relevant_documents(self, query: str, *, run_manager: Any = None) -> list[Document]:
            return [Document(page_content=d.page_content, metadata=d.metadata)
                    for d in store.similarity_search(query, 2)]

    return Unidentified()


class Chain:
    """``{"context": retriever | join, "question": passthrough} | prompt | chat model | str``."""

    def __init__(self, *, with_ids: bool = True) -> None:
        """``with_ids=False``: a retriever of the application's own (a ``BaseRetriever``) whose documents have no
        ids, as many loaders produce them."""
        tap()
        from langchain_core.documents import Document
        from langchain_core.embeddings import DeterministicFakeEmbedding
        from langchain_core.language_models.fake_chat_models import FakeListChatModel
        from langchain_core.output_parsers import StrOutputParser
        from langchain_core.prompts import ChatPromptTemplate
        from langchain_core.runnables import RunnablePassthrough
        from langchain_core.vectorstores import InMemoryVectorStore

        self.store = InMemoryVectorStore(DeterministicFakeEmbedding(size=32))
        self.store.add_documents([Document(page_content=text, metadata={"doc_id": name}, id=f"lc-{name}")
                                  for name, text in CORPUS.items()])
        self.retriever = self.store.as_retriever(search_kwargs={"k": 2}) if with_ids else _without_ids(self.store)
        prompt = ChatPromptTemplate.from_template("Answer from the context.\nContext: {context}\nQuestion: {question}")
        self.model = FakeListChatModel(responses=[ANSWER])
        join: Any = lambda docs: "\n".join(d.page_content for d in docs)  # noqa: E731
        self.chain = {"context": self.retriever | join, "question": RunnablePassthrough()} | prompt | self.model | \
            StrOutputParser()
        self.bare = prompt | self.model | StrOutputParser()

    def ask(self, question: str) -> Sent:
        from openinference.instrumentation import suppress_tracing

        with suppress_tracing():  # what the retriever returns, without a trace of its own
            docs = self.retriever.invoke(question)
        answer = self.chain.invoke(question)
        return Sent(question, answer, [d.id or "" for d in docs], [None] * len(docs), [d.page_content for d in docs],
                    model="")

    def without_retrieval(self, question: str) -> str:
        """A prompt and a model, no retriever: not a RAG query."""
        return self.bare.invoke({"context": "", "question": question})
