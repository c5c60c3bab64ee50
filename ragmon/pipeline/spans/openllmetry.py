"""Spans of OpenLLMetry (Traceloop's ``opentelemetry-instrumentation-llamaindex``, ``-langchain``, ``-openai``),
read as OpenInference.

Owns what OpenLLMetry's ``traceloop.*`` attributes mean to ragmon: ``traceloop.entity.input``/``output`` (JSON of
the call's arguments and result) as the span's input and output, and which span is the retriever — LangChain's
``vector_db_retrieve`` operation (documents ``{"page_content", "metadata"}``, no id, no score) or a LlamaIndex span
whose result is a list of ``NodeWithScore`` (node id, text, metadata and score) and whose arguments hold no nodes
(a postprocessor that takes nodes and returns them is a reranker). Model calls are GenAI-convention spans
(``genai``). Measured with opentelemetry-instrumentation-llamaindex/-langchain/-openai 0.62 (docs/otlp.md).

``view`` never raises and never coerces (the mapping dead-letters a value of the wrong type); JSON that does not
parse gives no documents. No I/O.
"""

from __future__ import annotations

import json
from typing import Any

_KINDS = {"workflow": "CHAIN", "task": "CHAIN", "agent": "AGENT", "tool": "TOOL"}
_JSON_START = ("{", "[", '"')


def is_openllmetry(attrs: dict[str, Any]) -> bool:
    return "traceloop.span.kind" in attrs or "traceloop.entity.output" in attrs


def view(attrs: dict[str, Any]) -> dict[str, Any]:
    """The OpenInference attributes an OpenLLMetry span stands for, beyond its GenAI ones ({} for another span)."""
    if not is_openllmetry(attrs):
        return {}
    out: dict[str, Any] = {}
    kind = _KINDS.get(str(attrs.get("traceloop.span.kind", "")))
    if kind and "gen_ai.operation.name" not in attrs:  # an embedding workflow is an EMBEDDING span (genai)
        out["openinference.span.kind"] = kind
    for field in ("input", "output"):
        value = attrs.get(f"traceloop.entity.{field}")
        if isinstance(value, str):
            out[f"{field}.value"] = value
            if value.lstrip().startswith(_JSON_START):
                out[f"{field}.mime_type"] = "application/json"
    output = attrs.get("traceloop.entity.output")
    if not isinstance(output, str):
        return out
    if attrs.get("gen_ai.operation.name") == "vector_db_retrieve":
        out["openinference.span.kind"] = "RETRIEVER"
        out.update(_attributes("retrieval.documents.", _langchain_documents(output)))
    elif "NodeWithScore" in output:
        nodes = _llamaindex_nodes(output)
        if nodes:
            given = _given_nodes(attrs.get("traceloop.entity.input"))
            if given:  # a postprocessor: nodes in, nodes out
                out["openinference.span.kind"] = "RERANKER"
                out.update(_attributes("reranker.input_documents.", given))
                out.update(_attributes("reranker.output_documents.", nodes))
            else:
                out["openinference.span.kind"] = "RETRIEVER"
                out.update(_attributes("retrieval.documents.", nodes))
    return out


def _attributes(prefix: str, docs: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for i, doc in enumerate(docs):
        for field, value in doc.items():
            if value is not None:
                out[f"{prefix}{i}.document.{field}"] = json.dumps(value) if field == "metadata" else value
    return out


def _loads(text: Any) -> Any:
    if not isinstance(text, str):
        return None
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return None


def _langchain_documents(output: str) -> list[dict[str, Any]]:
    """``{"documents": [{"page_content", "metadata", "id"?}], "count"}`` (LangChain's retriever result)."""
    doc = _loads(output)
    items = doc.get("documents") if isinstance(doc, dict) else None
    if not isinstance(items, list):
        return []
    return [{"id": item.get("id"), "content": item.get("page_content"), "metadata": item.get("metadata")}
            for item in items if isinstance(item, dict)]


def _llamaindex_nodes(value: Any) -> list[dict[str, Any]]:
    """A JSON list of ``NodeWithScore`` (each itself JSON text, as OpenLLMetry serialises them, or an object)."""
    items = _loads(value) if isinstance(value, str) else value
    if not isinstance(items, list):
        return []
    out = []
    for item in items:
        if isinstance(item, str):
            item = _loads(item)
        if not isinstance(item, dict) or not isinstance(item.get("node"), dict):
            return []  # not a list of scored nodes
        node = item["node"]
        out.append({"id": node.get("id_"), "content": node.get("text"), "metadata": node.get("metadata"),
                    "score": item.get("score")})
    return out


def _given_nodes(value: Any) -> list[dict[str, Any]]:
    """The nodes a postprocessor was given (``{"nodes": [...]}`` among its arguments), else []."""
    args = _loads(value)
    if not isinstance(args, dict):
        return []
    return _llamaindex_nodes(args.get("nodes"))
