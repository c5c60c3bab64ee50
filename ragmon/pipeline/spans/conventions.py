"""Which convention a span follows, and the span as the mapping reads it (OpenInference attributes).

Owns the per-span dispatch: a span with ``openinference.span.kind`` is OpenInference and is read as it is; any
other gets the OpenInference attributes its own convention stands for — OpenLLMetry's ``traceloop.*``
(``openllmetry``) or Pydantic AI's agent run (``pydantic_ai``) over the GenAI semantic conventions' ``gen_ai.*``
(``genai``) — added beside its own (which
win on a clash, and stay in dead letters), and ``ragmon.otlp.convention`` naming the convention read. A trace
may mix conventions: each span is read by its own. Never raises (``view`` functions do not). No I/O.
"""

from __future__ import annotations

from ragmon.pipeline.spans import genai, openllmetry, pydantic_ai
from ragmon.pipeline.spans.otlp import Span

#: the span attribute naming the convention a span was read by (absent: OpenInference, or none)
CONVENTION = "ragmon.otlp.convention"


def canonical(span: Span) -> Span:
    """``span`` itself when it is OpenInference or follows no known convention, else a copy with the
    OpenInference attributes it stands for."""
    attrs = span.attributes
    if "openinference.span.kind" in attrs:
        return span
    derived = genai.view(attrs)
    extra = openllmetry.view(attrs)
    agent = pydantic_ai.view(attrs)
    if not derived and not extra:
        return span
    # OpenLLMetry's model calls are GenAI spans with traceloop.* beside (LangChain's), or without (its OpenAI one);
    # Pydantic AI's model and tool calls are plain GenAI spans, its agent run carries its own attributes too
    traceloop = bool(extra) or any(k.startswith("traceloop.") for k in attrs)
    derived.update(extra)
    derived.update(agent)
    derived[CONVENTION] = "openllmetry" if traceloop else "pydantic_ai" if pydantic_ai.is_agent_run(attrs) else "genai"
    derived.update(attrs)
    return Span(span.trace_id, span.span_id, span.parent_span_id, span.name, span.start_ns, span.end_ns, derived,
                span.status_error)


def convention(span: Span) -> str:
    """The convention ``span`` was read by: ``openinference``, ``openllmetry``, ``pydantic_ai``, ``genai``, or ''
    (none known)."""
    attrs = span.attributes
    return str(attrs.get(CONVENTION) or ("openinference" if "openinference.span.kind" in attrs else ""))
