"""The question and the answer of an OpenInference trace, as text: plain ``input.value``/``output.value``, or the
field of the JSON object some instrumentations record there (LlamaIndex's chat engines: ``{"message": …}``), an
LLM call's output messages, and never a streaming placeholder (``<generator object>``).

Owns reading texts out of spans for ``openinference.build``; it never raises and never guesses beyond the keys
listed here (docs/otlp.md). No I/O.
"""

from __future__ import annotations

import json
import re
from typing import Any

from ragmon.pipeline.spans.otlp import Span

# OpenLLMetry records the call's arguments and result: LlamaIndex's ``str_or_query_bundle``, LangChain's ``inputs``
# and ``outputs`` (docs/otlp.md)
_QUESTION_KEYS = ("query_str", "question", "query", "message", "input", "user_input", "str_or_query_bundle", "inputs")
_ANSWER_KEYS = ("response", "answer", "output", "result", "content", "text", "outputs")
#: what an instrumentation records while a streamed answer is still being generated
_PLACEHOLDER = re.compile(r"<(?:async_)?generator object|<(?:Streaming|Async)\w*Response")


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
        except (ValueError, RecursionError):
            return "" if mime == "application/json" else _unless_placeholder(value)
        if isinstance(doc, str):  # a JSON-encoded string: the text itself
            return _unless_placeholder(doc)
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


def root_answer(root: Span) -> str:
    return _text(root, "output", _ANSWER_KEYS)


def llm_text(span: Span) -> str:
    """What an LLM span generated: its last output message, else its output value."""
    attrs, text, i = span.attributes, None, 0
    # indexed from 0 without gaps: a lookup per message, not a scan of every attribute (this runs per LLM span)
    while (content := attrs.get(f"llm.output_messages.{i}.message.content")) is not None or \
            f"llm.output_messages.{i}.message.role" in attrs:
        text, i = content, i + 1
    if isinstance(text, str) and text:
        return text
    return _text(span, "output", _ANSWER_KEYS)


def question(root: Span, retriever: Span | None, reranker: Span | None) -> str:
    text = _text(root, "input", _QUESTION_KEYS)
    if not text and retriever is not None:
        text = _text(retriever, "input", _QUESTION_KEYS)
    if not text and reranker is not None and isinstance(reranker.attributes.get("reranker.query"), str):
        text = reranker.attributes["reranker.query"]
    return text
