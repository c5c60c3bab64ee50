"""Pydantic AI's agent runs (its own OpenTelemetry instrumentation, ``InstrumentationSettings``), read as
OpenInference.

Owns what Pydantic AI records beyond the GenAI conventions (``genai``), on the ``invoke_agent`` span of an agent
run: the run's messages as ``pydantic_ai.all_messages`` (GenAI message JSON; the question is the last ``user``
message with text, tool returns are ``user`` messages without text) and its output as ``final_result`` (the text,
or a structured output's JSON). Its model calls (``chat``) and tool calls (``execute_tool``, with
``gen_ai.tool.call.arguments``/``result``) are plain GenAI spans. Measured with pydantic-ai-slim 2.31 (instrumentation
format version 5; docs/otlp.md).

``view`` never raises and never coerces: a value of the wrong type is left out (the field is then missing, not
invented). No I/O.
"""

from __future__ import annotations

from typing import Any

from ragmon.pipeline.spans.genai import last_text

MESSAGES = "pydantic_ai.all_messages"
RESULT = "final_result"


def is_agent_run(attrs: dict[str, Any]) -> bool:
    return attrs.get("gen_ai.operation.name") == "invoke_agent" and (MESSAGES in attrs or RESULT in attrs)


def view(attrs: dict[str, Any]) -> dict[str, Any]:
    """The OpenInference attributes a Pydantic AI agent run stands for, beyond its GenAI ones ({} otherwise)."""
    if not is_agent_run(attrs):
        return {}
    out: dict[str, Any] = {}
    question = last_text(attrs.get(MESSAGES), role="user")
    if question:
        out["input.value"] = question
        out["input.mime_type"] = "text/plain"
    result = attrs.get(RESULT)
    answer = result if isinstance(result, str) and result else last_text(attrs.get(MESSAGES), role="assistant")
    if answer:
        out["output.value"] = answer
        out["output.mime_type"] = "text/plain"  # a structured output's JSON is the answer as it is
    return out
