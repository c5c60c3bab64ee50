"""Spans that follow the OpenTelemetry GenAI semantic conventions (``gen_ai.*``), read as OpenInference.

Owns what a ``gen_ai.operation.name`` span means to ragmon, as the OpenInference attributes the mapping reads
(``openinference.build``): a model call (``chat``, ``text_completion``, ``generate_content``: its model, token
usage and generated text), an embedding call, a ``retrieval`` (its ``gen_ai.retrieval.query.text`` and
``gen_ai.retrieval.documents``), a workflow or agent (its input and output messages, the query's question and
answer), a tool (``execute_tool``: its ``gen_ai.tool.call.arguments`` as input; a retriever when its
``gen_ai.tool.call.result`` is a list of documents, objects with an ``id`` or a ``score``, as an agent's retrieval
tool returns them); and ``gen_ai.conversation.id`` as the session. Measured with
opentelemetry-instrumentation-openai-v2 and opentelemetry-util-genai's ``TelemetryHandler`` (docs/otlp.md).

``view`` never raises and never coerces: a value of the wrong type is passed on as it is, and the mapping
dead-letters the trace. JSON that does not parse gives nothing (the field is then missing, not invented). No I/O.
"""

from __future__ import annotations

import json
from typing import Any

#: operations that call a model and whose output may be the answer
LLM_OPERATIONS = ("chat", "text_completion", "generate_content")
_KINDS = {**dict.fromkeys(LLM_OPERATIONS, "LLM"), "embeddings": "EMBEDDING", "retrieval": "RETRIEVER",
          "execute_tool": "TOOL", "invoke_agent": "AGENT", "create_agent": "AGENT", "invoke_workflow": "CHAIN"}


def view(attrs: dict[str, Any]) -> dict[str, Any]:
    """The OpenInference attributes a GenAI span stands for ({} when it names no operation)."""
    op = attrs.get("gen_ai.operation.name")
    if not isinstance(op, str) or not op:
        return {}
    out: dict[str, Any] = {"openinference.span.kind": _KINDS.get(op, "CHAIN")}
    if op in LLM_OPERATIONS:
        model = attrs.get("gen_ai.response.model") or attrs.get("gen_ai.request.model")
        if model is not None:
            out["llm.model_name"] = model
        for source, target in (("gen_ai.usage.input_tokens", "llm.token_count.prompt"),
                               ("gen_ai.usage.output_tokens", "llm.token_count.completion")):
            if source in attrs:
                out[target] = attrs[source]
        text = last_text(attrs.get("gen_ai.output.messages"))
        if text:
            out["llm.output_messages.0.message.role"] = "assistant"
            out["llm.output_messages.0.message.content"] = text
    elif op == "retrieval":
        if isinstance(attrs.get("gen_ai.retrieval.query.text"), str):
            out["input.value"] = attrs["gen_ai.retrieval.query.text"]
        out.update(_documents(attrs.get("gen_ai.retrieval.documents")))
    elif op == "execute_tool":
        if isinstance(attrs.get("gen_ai.tool.call.arguments"), str):
            out["input.value"] = attrs["gen_ai.tool.call.arguments"]
        found = _documents(attrs.get("gen_ai.tool.call.result"), tool=True)
        if found:
            out["openinference.span.kind"] = "RETRIEVER"
            out.update(found)
    elif op in ("invoke_workflow", "invoke_agent"):
        question = last_text(attrs.get("gen_ai.input.messages"), role="user")
        answer = last_text(attrs.get("gen_ai.output.messages"))
        if question:
            out["input.value"] = question
        if answer:
            out["output.value"] = answer
    if "gen_ai.conversation.id" in attrs:
        out["session.id"] = attrs["gen_ai.conversation.id"]
    return out


def last_text(value: Any, *, role: str = "") -> str:
    """The text parts of the last message (of ``role``, if given) in a ``gen_ai.*.messages`` JSON array."""
    messages = _loads(value)
    if not isinstance(messages, list):
        return ""
    for message in reversed(messages):
        if not isinstance(message, dict) or (role and message.get("role") != role):
            continue
        parts = message.get("parts")
        if isinstance(parts, list):
            texts = [p.get("content") for p in parts if isinstance(p, dict) and p.get("type", "text") == "text"]
            text = "".join(t for t in texts if isinstance(t, str))
            if text:
                return text
    return ""


def _documents(value: Any, *, tool: bool = False) -> dict[str, Any]:
    """``gen_ai.retrieval.documents`` (a JSON array of ``{"id", "score"}`` objects, content optional) as
    OpenInference ``retrieval.documents.N.document.*``. A tool's result (``tool``) is documents only when it is a
    non-empty array whose every item is an object with an ``id`` or a ``score`` (any other result is not a
    retrieval)."""
    docs = _loads(value)
    if not isinstance(docs, list):
        return {}
    if tool and not (docs and all(isinstance(d, dict) and ("id" in d or "score" in d) for d in docs)):
        return {}
    out: dict[str, Any] = {}
    for i, doc in enumerate(docs):
        if not isinstance(doc, dict):
            continue
        prefix = f"retrieval.documents.{i}.document."
        for source, target in (("id", "id"), ("score", "score"), ("content", "content"), ("text", "content")):
            if source in doc and doc[source] is not None and prefix + target not in out:
                out[prefix + target] = doc[source]
        if isinstance(doc.get("metadata"), dict):
            out[prefix + "metadata"] = json.dumps(doc["metadata"])
    return out


def _loads(value: Any) -> Any:
    if not isinstance(value, str):
        return value if isinstance(value, list) else None
    try:
        return json.loads(value)
    except (ValueError, RecursionError):
        return None
