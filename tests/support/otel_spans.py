"""RAG query spans made by the REAL OpenTelemetry SDK with OpenInference attributes, and OTLP encodings.

``rag_spans`` runs a TracerProvider with an InMemorySpanExporter; ``otlp_messages`` splits the finished spans
into several ExportTraceServiceRequest payloads with the real OTLP encoder (``encode_spans``), as protobuf
bytes, protobuf json_format JSON (base64 ids) or OTLP/JSON (hex ids, as the Collector writes it).
"""

from __future__ import annotations

import base64
import json
from typing import Any

from google.protobuf import json_format
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter


def rag_spans(n: int, *, prefix: str = "q", docs: int = 3, scores: bool = True) -> list[ReadableSpan]:
    """``n`` RAG queries: a CHAIN root with a RETRIEVER and an LLM child each (children finish first); without
    ``scores``, the retrieved documents carry no ``document.score``."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "rag-app"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("rag-app")
    for q in range(n):
        question = f"How do I reset my password? ({prefix}{q})"
        with tracer.start_as_current_span("rag.query", attributes={
            "openinference.span.kind": "CHAIN", "input.value": question, "ragmon.query_id": f"{prefix}{q}",
            "ragmon.category": "account", "ragmon.retriever.version": "v3",
        }) as root:
            attrs: dict[str, Any] = {"openinference.span.kind": "RETRIEVER", "input.value": question}
            for d in range(docs):
                attrs[f"retrieval.documents.{d}.document.id"] = f"kb@c{d}"
                if scores:
                    attrs[f"retrieval.documents.{d}.document.score"] = round(0.9 - 0.1 * d, 3)
                attrs[f"retrieval.documents.{d}.document.content"] = f"Passage {d} about passwords."
                attrs[f"retrieval.documents.{d}.document.metadata"] = json.dumps({"doc_id": "kb", "doc_version": "7"})
            with tracer.start_as_current_span("hybrid-retriever", attributes=attrs):
                pass
            with tracer.start_as_current_span("generate", attributes={
                "openinference.span.kind": "LLM", "llm.model_name": "gen-1", "llm.token_count.prompt": 120,
                "llm.token_count.completion": 24, "output.value": "Use the reset link.",
            }):
                pass
            root.set_attribute("output.value", "Use the reset link on the sign-in page.")
    provider.shutdown()
    return list(exporter.get_finished_spans())


def otlp_messages(spans: list[ReadableSpan], per_message: int, encoding: str) -> list[bytes]:
    """Split ``spans`` (in finish order) into messages of ``per_message`` spans, encoded as asked."""
    out = []
    for i in range(0, len(spans), per_message):
        request = encode_spans(spans[i:i + per_message])
        if encoding == "proto":
            out.append(request.SerializeToString())
        elif encoding == "json_format":
            out.append(json_format.MessageToJson(request).encode())
        elif encoding == "otlp_json":
            doc = json_format.MessageToDict(request)
            _ids_to_hex(doc)
            out.append(json.dumps(doc).encode())
        else:
            raise ValueError(encoding)
    return out


def _ids_to_hex(doc: Any) -> None:
    if isinstance(doc, dict):
        for k, v in doc.items():
            if k in ("traceId", "spanId", "parentSpanId") and isinstance(v, str):
                doc[k] = base64.b64decode(v).hex()
            else:
                _ids_to_hex(v)
    elif isinstance(doc, list):
        for x in doc:
            _ids_to_hex(x)
