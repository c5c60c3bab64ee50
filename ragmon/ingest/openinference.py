"""OpenInference spans of one trace → a trace.v1 document, or why the trace is not a RAG query.

Owns the mapping documented in docs/otlp.md: which traces are RAG queries (``skip_reason``), which span is
the retriever, the reranker and the LLM call that wrote the answer, the question and answer texts (plain or
inside the JSON some instrumentations record), chunk ids (the document id, else a content hash: never a
position), tokens summed over every LLM call, and when a trace looks finished (``looks_finished``: the
assembler stops waiting). Attributes of the wrong type raise ``ValueError`` (the assembler dead-letters the
trace); everything else is never invented. No I/O, no buffering (``otlp_assembly`` buffers).
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from ragmon.ingest.otlp import Span
from ragmon.store.trace_rows import VERSION_ATTRIBUTE

#: why a trace is not stored as a query (``ragmon_ingest_otlp_traces_skipped_total{reason}``)
SKIP_REASONS = ("embedding_only", "llm_only", "no_retriever")

_QUESTION_KEYS = ("query_str", "question", "query", "message", "input", "user_input")
_ANSWER_KEYS = ("response", "answer", "output", "result", "content", "text")
#: what an instrumentation records while a streamed answer is still being generated
_PLACEHOLDER = re.compile(r"<(?:async_)?generator object|<(?:Streaming|Async)\w*Response")
_DOC_ID_KEYS = ("doc_id", "document_id", "ref_doc_id", "source")
_DOC_VERSION_KEYS = ("doc_version", "version")
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
    if kinds == {"EMBEDDING"}:
        return "embedding_only"
    return "llm_only" if kind(root_of(spans)) == "LLM" else "no_retriever"


def looks_finished(spans: list[Span]) -> bool:
    """The shape of a finished RAG query: a retriever, an LLM call and the final answer text. The assembler stores
    such a trace at once; any other waits ``otlp_settle_seconds`` after its root for spans still on their way
    (another service's, a streamed answer's)."""
    kinds = {kind(s) for s in spans}
    if "RETRIEVER" not in kinds or "LLM" not in kinds:
        return False
    return bool(_root_answer(root_of(spans))) or any(_llm_text(s) for s in spans if kind(s) == "LLM")


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
    retriever = next((s for s in retrievers if _has_documents(s, "retrieval.documents.")), None) or \
        (retrievers[0] if retrievers else None)
    reranker = next((s for s in ordered if kind(s) == "RERANKER"
                     and _has_documents(s, "reranker.output_documents.")), None)
    llms = sorted((s for s in spans if kind(s) == "LLM"), key=lambda s: (s.end_ns, s.start_ns))
    # the call that wrote the answer: the last to end with text (a streaming wrapper ends after its child, textless)
    answer_span = ([s for s in llms if _llm_text(s)] or llms or [None])[-1]

    retrieved = _documents(retriever, "retrieval.documents.") if retriever is not None else []
    context: list[str] = []
    if reranker is not None:
        if retriever is None or not retrieved:
            retrieved = _documents(reranker, "reranker.input_documents.")
        reranked = _documents(reranker, "reranker.output_documents.")
        context = [d["chunk_id"] for d in reranked]
        known = {d["chunk_id"] for d in retrieved}
        for d in reranked:  # the model saw it: keep its text, without the reranker's score (another scale)
            if d["chunk_id"] not in known:
                known.add(d["chunk_id"])
                retrieved.append({**d, "score": None, "rank": len(retrieved) + 1})

    a = root.attributes
    attributes = {"otel.trace_id": root.trace_id, "otel.span_count": str(len(spans))}
    for name, value in (("service.name", a.get("resource.service.name")), ("session.id", _first(ordered, "session.id")),
                        ("user.id", _first(ordered, "user.id")),
                        ("reranker.model_name", reranker.attributes.get("reranker.model_name") if reranker else None)):
        if isinstance(value, str | int) and not isinstance(value, bool) and str(value):
            attributes[name] = str(value)[:_LABEL_MAX]
    missing = [part for part, absent in (("retriever", retriever is None),
                                         ("llm", answer_span is None and kind(root) != "RETRIEVER")) if absent]
    if incomplete:
        missing.append("parent")
    if missing:
        attributes["ragmon.otlp.incomplete"] = "true"
        attributes["ragmon.otlp.missing"] = ",".join(missing)
    if version > 1:
        attributes[VERSION_ATTRIBUTE] = str(version)

    latency = {"total": _ms(root)}
    for stage, span in (("retrieve", retriever), ("rerank", reranker), ("generate", _outermost_llm(answer_span, by_id))):
        if span is not None:
            latency[stage] = _ms(span)
    tags = _first(ordered, "tag.tags")
    name = str(_first(ordered, "ragmon.retriever.name") or (retriever.name if retriever else root.name))
    variant = str(_first(ordered, "ragmon.retriever.variant") or "production")
    category = str(_first(ordered, "ragmon.category") or "")
    if key is not None:
        name, variant, category = key
    prompt, completion = _tokens(spans, by_id)
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
        "question": _question(root, retriever, reranker),
        "category": category,
        "tags": [str(t) for t in tags] if isinstance(tags, list) else [],
        "tenant": str(_first(ordered, "ragmon.tenant") or ""),
        "retrieved": retrieved,
        "context": {"chunk_ids": context},
        "answer": _root_answer(root) or (_llm_text(answer_span) if answer_span is not None else ""),
        "behaviour": str(_first(ordered, "ragmon.behaviour") or "answer"),
        "model": {"name": _model(answer_span, by_id, spans),
                  "version": str(_first(ordered, "ragmon.model_version") or "")},
        "latency_ms": latency,
        "tokens": {"prompt": prompt, "completion": completion},
        "error": next((s.status_error for s in ordered if s.status_error), ""),
        "attributes": attributes,
    }
    unscored = sum(1 for d in retrieved if d["score"] is None)
    return Mapped(json.dumps(doc, allow_nan=True).encode(), key=(name, variant, category), unscored=unscored)


# -- texts ------------------------------------------------------------------------------------------------------

def _text(span: Span, field: str, keys: tuple[str, ...]) -> str:
    """``<field>.value`` as text: plain, or the first of ``keys`` in the JSON object it holds ('' otherwise, and
    for a streaming placeholder)."""
    value = span.attributes.get(f"{field}.value")
    if not isinstance(value, str):
        return ""
    mime = span.attributes.get(f"{field}.mime_type")
    if mime == "application/json" or (mime is None and value.lstrip().startswith("{")):
        try:
            doc = json.loads(value)
        except ValueError:
            return "" if mime == "application/json" else _unless_placeholder(value)
        return _from_json(doc, keys)
    return _unless_placeholder(value)


def _from_json(doc: Any, keys: tuple[str, ...], depth: int = 0) -> str:
    if not isinstance(doc, dict) or depth > 2:
        return ""
    for k in keys:
        v = doc.get(k)
        if isinstance(v, str) and v:
            return _unless_placeholder(v)
    for v in doc.values():  # e.g. {"query_bundle": {"query_str": …}}
        found = _from_json(v, keys, depth + 1)
        if found:
            return found
    return ""


def _unless_placeholder(text: str) -> str:
    return "" if _PLACEHOLDER.search(text[:200]) else text


def _root_answer(root: Span) -> str:
    return _text(root, "output", _ANSWER_KEYS)


def _llm_text(span: Span) -> str:
    """What an LLM span generated: its last output message, else its output value."""
    messages = [(int(k.split(".")[2]), v) for k, v in span.attributes.items()
                if k.startswith("llm.output_messages.") and k.endswith(".message.content") and k.split(".")[2].isdigit()]
    if messages:
        text = max(messages)[1]
        if isinstance(text, str) and text:
            return text
    return _text(span, "output", _ANSWER_KEYS)


def _question(root: Span, retriever: Span | None, reranker: Span | None) -> str:
    text = _text(root, "input", _QUESTION_KEYS)
    if not text and retriever is not None:
        text = _text(retriever, "input", _QUESTION_KEYS)
    if not text and reranker is not None and isinstance(reranker.attributes.get("reranker.query"), str):
        text = reranker.attributes["reranker.query"]
    return text


def _first(spans: list[Span], key: str) -> Any:
    for s in spans:
        if key in s.attributes:
            return s.attributes[key]
    return None


def _ms(span: Span) -> float:
    return max(0.0, (span.end_ns - span.start_ns) / 1e6)


# -- documents --------------------------------------------------------------------------------------------------

def _has_documents(span: Span, prefix: str) -> bool:
    return any(k.startswith(prefix) for k in span.attributes)


def _documents(span: Span, prefix: str) -> list[dict[str, Any]]:
    """The span's documents in rank order. A chunk id is ``document.id``, else the id in the span's JSON output
    (LangChain records ``Document.id`` only there), else ``sha256:`` of the content: the same chunk gets the same
    id in every trace, and two chunks never share one by position."""
    docs: dict[int, dict[str, Any]] = {}
    for k, value in span.attributes.items():
        if k.startswith(prefix):
            index, _, field = k[len(prefix):].partition(".")
            if index.isdigit():
                docs.setdefault(int(index), {})[field] = value
    output_ids = _output_ids(span) if any("document.id" not in d for d in docs.values()) else []
    out = []
    for rank, i in enumerate(sorted(docs), start=1):
        d = docs[i]
        where = f"{prefix}{i}"
        content = d.get("document.content")
        if "document.id" in d:
            chunk_id = _scalar_text(d["document.id"], f"{where}.document.id")
        elif i < len(output_ids) and output_ids[i][1] == content and output_ids[i][0]:
            chunk_id = output_ids[i][0]
        elif isinstance(content, str):
            chunk_id = "sha256:" + hashlib.sha256(content.encode()).hexdigest()[:32]
        else:
            raise ValueError(f"{where} has neither document.id nor document.content: no chunk id to give it")
        meta = d.get("document.metadata")
        if isinstance(meta, str):
            try:
                meta = json.loads(meta)
            except ValueError:
                meta = None
        meta = meta if isinstance(meta, dict) else {}
        chunk = {"chunk_id": chunk_id, "rank": rank, "doc_id": _label(meta, _DOC_ID_KEYS),
                 "doc_version": _label(meta, _DOC_VERSION_KEYS), "score": d.get("document.score")}
        if isinstance(content, str):
            chunk["text"] = content
        out.append(chunk)
    return out


def _output_ids(span: Span) -> list[tuple[str, Any]]:
    """(id, content) of each document in the span's JSON output, e.g. LangChain's ``{"documents": [{"id", …}]}``."""
    value = span.attributes.get("output.value")
    if not isinstance(value, str) or not value.lstrip().startswith(("{", "[")):
        return []
    try:
        doc = json.loads(value)
    except ValueError:
        return []
    items = doc.get("documents") if isinstance(doc, dict) else doc
    if not isinstance(items, list):
        return []
    out = []
    for item in items:
        item = item if isinstance(item, dict) else {}
        ident = item.get("id")
        out.append((ident if isinstance(ident, str) and 0 < len(ident) <= _LABEL_MAX else "",
                    item.get("page_content", item.get("text"))))
    return out


def _label(meta: dict[str, Any], keys: tuple[str, ...]) -> str:
    for k in keys:
        v = meta.get(k)
        if isinstance(v, str | int) and not isinstance(v, bool) and len(str(v)) <= _LABEL_MAX:
            return str(v)
    return ""


def _scalar_text(value: Any, key: str) -> str:
    """An id attribute as text: strings and integers only (an array's Python repr is not an id)."""
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise ValueError(f"{key} is {value!r}; expected a string")
    return str(value)


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
