"""OpenInference spans of one trace → a trace.v1 document, or why the trace is not a RAG query.

Owns the mapping documented in docs/otlp.md: which traces are RAG queries (``skip_reason``), which span is
the retriever, the reranker and the LLM call that wrote the answer, tokens summed over every LLM call, the model
that wrote the answer, and when a trace looks finished (``looks_finished``: the assembler stops waiting). Texts
come from ``openinference_texts``, chunks (ids never positional) from ``openinference_documents``. Attributes of
the wrong type raise ``ValueError`` (the assembler dead-letters the trace); nothing is invented. No I/O, no
buffering (``otlp_assembly`` buffers).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from ragmon.pipeline.spans.conventions import convention
from ragmon.pipeline.spans.openinference_documents import DERIVED_ID, documents, has_documents
from ragmon.pipeline.spans.openinference_texts import llm_text, question, root_answer
from ragmon.pipeline.spans.otlp import Span
from ragmon.store.trace_rows import VERSION_ATTRIBUTE

#: why a trace is not stored as a query (``ragmon_ingest_otlp_traces_skipped_total{reason}``)
SKIP_REASONS = ("embedding_only", "llm_only", "no_retriever")

_LABEL_MAX = 256

#: retriever name, variant, category: the sort-key fields a later version of a stored trace keeps
Key = tuple[str, str, str]


@dataclass(frozen=True, slots=True)
class Mapped:
    """A trace's document, or (``document`` None) the ``skipped`` reason it is not a query."""

    document: bytes | None
    skipped: str = ""
    key: Key | None = None
    unscored: int = 0  # documents stored without a score


def kind(span: Span) -> str:
    return str(span.attributes.get("openinference.span.kind", "")).upper()


def root_of(spans: list[Span]) -> Span:
    roots = [s for s in spans if not s.parent_span_id]
    return min(roots or spans, key=lambda s: s.start_ns)


def skip_reason(spans: list[Span]) -> str:
    """'' for a RAG query (a RETRIEVER span, or ``ragmon.query_id`` set by the application), else the reason."""
    kinds = {kind(s) for s in spans}
    if "RETRIEVER" in kinds or any("ragmon.query_id" in s.attributes for s in spans):
        return ""
    kinds.discard("")
    root = kind(root_of(spans))
    # the root says what the trace is: OpenLLMetry's embedding workflow has task spans below it, not EMBEDDING ones
    if kinds == {"EMBEDDING"} or root == "EMBEDDING":
        return "embedding_only"
    return "llm_only" if root == "LLM" else "no_retriever"


def looks_finished(spans: list[Span]) -> bool:
    """The shape of a finished RAG query: a retriever, an LLM call and the final answer text. The assembler stores
    such a trace at once; any other waits ``otlp_settle_seconds`` after its root for spans still on their way
    (another service's, a streamed answer's)."""
    kinds = {kind(s) for s in spans}
    if "RETRIEVER" not in kinds or "LLM" not in kinds:
        return False
    return bool(root_answer(root_of(spans))) or any(llm_text(s) for s in spans if kind(s) == "LLM")


def build(spans: list[Span], *, incomplete: bool, version: int = 1, key: Key | None = None) -> Mapped:
    """Map one trace's spans. ``incomplete``: a parent span never arrived. ``key``: the stored version's retriever,
    variant and category, kept by a later version so that it replaces the stored row (same sort key)."""
    reason = skip_reason(spans)
    if reason:
        return Mapped(None, reason)
    root = root_of(spans)
    ordered = [root] + sorted((s for s in spans if s is not root), key=lambda s: s.start_ns)
    by_id = {s.span_id: s for s in spans}
    retrievers = [s for s in ordered if kind(s) == "RETRIEVER"]
    # DSPy's Retrieve.forward records texts only; the retriever model's span below it (ColBERTv2) ids and scores too
    retriever = next((s for s in retrievers if has_documents(s, "retrieval.documents.", identified=True)), None) or \
        next((s for s in retrievers if has_documents(s, "retrieval.documents.")), None) or \
        (retrievers[0] if retrievers else None)
    reranker = next((s for s in ordered if kind(s) == "RERANKER"
                     and has_documents(s, "reranker.output_documents.")), None)
    llms = sorted((s for s in spans if kind(s) == "LLM"), key=lambda s: (s.end_ns, s.start_ns))
    # the call that wrote the answer: the last to end with text (a streaming wrapper ends after its child, textless)
    answer_span = ([s for s in llms if llm_text(s)] or llms or [None])[-1]

    retrieved, context = _retrieved_and_context(retriever, reranker)
    attributes = _attributes(spans, ordered, reranker)
    missing = [part for part, absent in (("retriever", retriever is None),
                                         ("llm", answer_span is None and kind(root) != "RETRIEVER")) if absent]
    if incomplete:
        missing.append("parent")
    if missing:
        attributes["ragmon.otlp.incomplete"] = "true"
        attributes["ragmon.otlp.missing"] = ",".join(missing)
    if version > 1:
        attributes[VERSION_ATTRIBUTE] = str(version)
    attributes["ragmon.otlp.conventions"] = ",".join(sorted({c for s in spans if (c := convention(s))}))
    latency = {"total": _ms(root)}
    for stage, span in (("retrieve", retriever), ("rerank", reranker),
                        ("generate", _outermost_llm(answer_span, by_id))):
        if span is not None:
            latency[stage] = _ms(span)
    tags = _first(ordered, "tag.tags")
    name = str(_first(ordered, "ragmon.retriever.name") or (retriever.name if retriever else root.name))
    variant = str(_first(ordered, "ragmon.retriever.variant") or "production")
    category = str(_first(ordered, "ragmon.category") or "")
    if key is not None:
        name, variant, category = key
    prompt, completion = _tokens(spans, by_id)
    model = _model(answer_span, by_id, spans)
    doc: dict[str, Any] = {
        "trace_id": root.trace_id,
        # never session.id: the turns of one conversation are different queries (shadow twins pair by query_id)
        "query_id": str(_first(ordered, "ragmon.query_id") or root.trace_id),
        "timestamp": datetime.fromtimestamp(root.start_ns / 1e9, UTC).isoformat(timespec="milliseconds")
        .replace("+00:00", "Z"),
        "retriever": {"name": name, "version": str(_first(ordered, "ragmon.retriever.version") or ""),
                      "variant": variant},
        "corpus_snapshot": str(_first(ordered, "ragmon.corpus_snapshot") or ""),
        "index_version": str(_first(ordered, "ragmon.index_version") or ""),
        "question": question(root, retriever, reranker),
        "category": category,
        "tags": [str(t) for t in tags] if isinstance(tags, list) else [],
        "tenant": str(_first(ordered, "ragmon.tenant") or ""),
        "retrieved": retrieved,
        "context": {"chunk_ids": context},
        "answer": root_answer(root) or (llm_text(answer_span) if answer_span is not None else ""),
        "behaviour": str(_first(ordered, "ragmon.behaviour") or "answer"),
        "model": {"name": model,
                  "version": str(_first(ordered, "ragmon.model_version") or "")},
        "latency_ms": latency,
        "tokens": {"prompt": prompt, "completion": completion},
        "error": next((s.status_error for s in ordered if s.status_error), ""),
        "attributes": attributes,
    }
    unavailable = _unavailable(doc, spans, has_llm=answer_span is not None)
    if unavailable:
        attributes["ragmon.otlp.unavailable"] = ",".join(unavailable)
    unscored = sum(1 for d in retrieved if d["score"] is None)
    return Mapped(json.dumps(doc, allow_nan=True).encode(), key=(name, variant, category), unscored=unscored)

def _retrieved_and_context(retriever: Span | None, reranker: Span | None) -> tuple[list[dict[str, Any]], list[str]]:
    """The retrieved documents and the context's chunk ids: the retriever's documents (the reranker's input when
    there is no retriever), and what the reranker kept, which the model saw (appended unscored when the retriever
    did not return it: the reranker's score is on another scale)."""
    retrieved = documents(retriever, "retrieval.documents.") if retriever is not None else []
    if reranker is None:
        return retrieved, []
    if retriever is None or not retrieved:
        retrieved = documents(reranker, "reranker.input_documents.")
    reranked = documents(reranker, "reranker.output_documents.")
    known = {d["chunk_id"] for d in retrieved}
    for d in reranked:
        if d["chunk_id"] not in known:
            known.add(d["chunk_id"])
            retrieved.append({**d, "score": None, "rank": len(retrieved) + 1})
    return retrieved, [d["chunk_id"] for d in reranked]


def _attributes(spans: list[Span], ordered: list[Span], reranker: Span | None) -> dict[str, str]:
    """The trace's first ``attributes``: its OTLP id and span count, who asked (service, session, user; cut to
    ``_LABEL_MAX``) and the reranker's model."""
    root = ordered[0]
    attributes = {"otel.trace_id": root.trace_id, "otel.span_count": str(len(spans))}
    for name, value in (("service.name", root.attributes.get("resource.service.name")),
                        ("session.id", _first(ordered, "session.id")), ("user.id", _first(ordered, "user.id")),
                        ("reranker.model_name", reranker.attributes.get("reranker.model_name") if reranker else None)):
        if isinstance(value, str | int) and not isinstance(value, bool) and str(value):
            attributes[name] = str(value)[:_LABEL_MAX]
    return attributes



def _unavailable(doc: dict[str, Any], spans: list[Span], *, has_llm: bool) -> list[str]:
    """The fields ragmon needs that the trace's spans did not carry (its instrumentation records none), stored
    empty or derived: ``ragmon.otlp.unavailable`` (docs/otlp.md, "What each instrumentation carries")."""
    retrieved = doc["retrieved"]
    absent = {
        "question": not doc["question"],
        "answer": not doc["answer"],
        "chunk_id": any(d["chunk_id"].startswith(DERIVED_ID) for d in retrieved),
        "score": any(d["score"] is None for d in retrieved),
        "text": any("text" not in d for d in retrieved),
        "model": has_llm and not doc["model"]["name"],
        "tokens": has_llm and not any(k in s.attributes for s in spans for k in _COUNTS),
    }
    return [name for name, missing in absent.items() if missing]


def _first(spans: list[Span], key: str) -> Any:
    for s in spans:
        if key in s.attributes:
            return s.attributes[key]
    return None


def _ms(span: Span) -> float:
    return max(0.0, (span.end_ns - span.start_ns) / 1e6)


# -- the LLM calls ------------------------------------------------------------------------------------------------

_COUNTS = ("llm.token_count.prompt", "llm.token_count.completion")


def _count(span: Span, key: str) -> int:
    """A token count: an integer attribute (or a float holding one); anything else makes the trace invalid."""
    value = span.attributes.get(key, 0)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{key} is {value!r}; expected an integer")
    return value


def _tokens(spans: list[Span], by_id: dict[str, Span]) -> tuple[int, int]:
    """Prompt and completion tokens of every LLM call: the spans that carry counts, except those whose counts a
    descendant also carries (a wrapper span that repeats or adds up its child's counts is not counted twice)."""
    counted = [s for s in spans if any(k in s.attributes for k in _COUNTS)]
    covered: set[str] = set()
    for s in counted:
        parent, seen = by_id.get(s.parent_span_id), 0
        while parent is not None and parent.span_id not in covered and seen < len(by_id):
            covered.add(parent.span_id)
            parent, seen = by_id.get(parent.parent_span_id), seen + 1
    leaves = [s for s in counted if s.span_id not in covered]
    return sum(_count(s, _COUNTS[0]) for s in leaves), sum(_count(s, _COUNTS[1]) for s in leaves)


def _outermost_llm(span: Span | None, by_id: dict[str, Span]) -> Span | None:
    """The LLM span that wraps ``span`` (LlamaIndex's ``predict`` around ``complete``): the generation's duration."""
    seen = 0
    while span is not None and seen < len(by_id):
        parent = by_id.get(span.parent_span_id)
        if parent is None or kind(parent) != "LLM":
            return span
        span, seen = parent, seen + 1
    return span


def _model(answer: Span | None, by_id: dict[str, Span], spans: list[Span]) -> str:
    """``llm.model_name`` of the call that wrote the answer, else of the LLM span wrapping it, else of one it wraps."""
    span, seen = answer, 0
    while span is not None and kind(span) == "LLM" and seen < len(by_id):
        name = span.attributes.get("llm.model_name")
        if isinstance(name, str) and name:
            return name[:_LABEL_MAX]
        span, seen = by_id.get(span.parent_span_id), seen + 1
    if answer is not None:
        below = [s for s in spans if kind(s) == "LLM" and _descends(s, answer.span_id, by_id)]
        for s in sorted(below, key=lambda s: s.end_ns, reverse=True):
            name = s.attributes.get("llm.model_name")
            if isinstance(name, str) and name:
                return name[:_LABEL_MAX]
    return ""


def _descends(span: Span, ancestor_id: str, by_id: dict[str, Span]) -> bool:
    parent, seen = by_id.get(span.parent_span_id), 0
    while parent is not None and seen < len(by_id):
        if parent.span_id == ancestor_id:
            return True
        parent, seen = by_id.get(parent.parent_span_id), seen + 1
    return False
