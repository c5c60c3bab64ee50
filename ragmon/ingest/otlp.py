"""OTLP trace payloads (protobuf and JSON) → spans, and OpenInference spans of one trace → a trace.v1 document.

Owns: telling native JSON from OTLP per message (``detect_format``), parsing an ``ExportTraceServiceRequest``
as the OpenTelemetry Collector's Kafka exporter writes it (``otlp_proto``: binary protobuf; ``otlp_json``:
OTLP/JSON with hex ids, also the base64 ids of protobuf's json_format), and mapping OpenInference attributes
to the trace contract (``build_document``; the mapping is documented in docs/otlp.md). It never raises on
input: a payload that is not OTLP is a ``Rejection``. It must not buffer spans (``otlp_assembly`` does).
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from ragmon.contracts.decode import Rejection


@dataclass(frozen=True, slots=True)
class Span:
    trace_id: str          # 32 hex digits
    span_id: str           # 16 hex digits
    parent_span_id: str    # "" for a root span
    name: str
    start_ns: int
    end_ns: int
    attributes: dict[str, Any]
    status_error: str      # the status message when the status code is ERROR, else ""


#: the resource attributes a trace is built from (build_document); the others are not copied onto each span
RESOURCE_ATTRIBUTES = ("service.name",)
_OTLP_JSON_START = re.compile(rb'\A\s*\{\s*"(?:resourceSpans|resource_spans)"\s*:')


def detect_format(data: bytes) -> str:
    """'native', 'otlp_json' or 'otlp_proto' from the first bytes (for kafka.input_format=auto)."""
    head = data[:64].lstrip()
    if head[:1] == b"{":  # OTLP/JSON only when resourceSpans is the object's first key, not text further in
        return "otlp_json" if _OTLP_JSON_START.match(data[:256]) else "native"
    if data[:1] == b"\x0a":  # field 1 (resource_spans), length-delimited: an ExportTraceServiceRequest
        return "otlp_proto"
    return "native"  # the native decoder turns anything else into a clear rejection


def parse_otlp(data: bytes, fmt: str, *, max_bytes: int) -> list[Span] | Rejection:
    """Parse one message; never raises."""
    if len(data) > max_bytes:
        return Rejection("too_large", f"message is {len(data)} bytes, over the limit of {max_bytes}")
    try:
        from google.protobuf import json_format
        from google.protobuf.message import DecodeError
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
    except ImportError:  # pragma: no cover - a dependency of ragmon
        return Rejection("invalid_otlp", "opentelemetry-proto is not installed: pip install opentelemetry-proto")
    request = ExportTraceServiceRequest()
    try:
        if fmt == "otlp_proto":
            request.ParseFromString(data)
        else:
            doc = json.loads(data)
            if not isinstance(doc, dict):
                return Rejection("invalid_otlp", "OTLP/JSON top level must be an object with resourceSpans")
            _hex_ids_to_base64(doc)
            json_format.ParseDict(doc, request, ignore_unknown_fields=True)
    except (DecodeError, json_format.ParseError, ValueError, TypeError, RecursionError) as exc:
        return Rejection("invalid_otlp", f"not an OTLP ExportTraceServiceRequest ({fmt}): {str(exc)[:300]}")
    spans: list[Span] = []
    try:
        for rs in request.resource_spans:
            resource = _attributes(rs.resource.attributes)
            kept = {f"resource.{k}": resource[k] for k in RESOURCE_ATTRIBUTES if k in resource}
            for ss in rs.scope_spans:
                for s in ss.spans:
                    if len(s.trace_id) != 16 or len(s.span_id) != 8:
                        return Rejection("invalid_otlp", f"span {s.name!r} has a trace id of {len(s.trace_id)} "
                                         f"bytes and a span id of {len(s.span_id)} bytes; expected 16 and 8")
                    attrs = dict(kept)  # not every resource attribute: N of them on N spans would be N² entries
                    attrs.update(_attributes(s.attributes))
                    spans.append(Span(
                        s.trace_id.hex(), s.span_id.hex(), s.parent_span_id.hex() if s.parent_span_id else "",
                        s.name, int(s.start_time_unix_nano), int(s.end_time_unix_nano), attrs,
                        s.status.message or "error" if s.status.code == 2 else "",
                    ))
    except (ValueError, TypeError) as exc:
        return Rejection("invalid_otlp", f"malformed span: {exc}"[:400])
    return spans


def _hex_ids_to_base64(doc: Any) -> None:
    """OTLP/JSON writes ids as hex; protobuf's JSON mapping expects base64. Convert in place, recursively."""
    if isinstance(doc, dict):
        for key, value in doc.items():
            if key in ("traceId", "spanId", "parentSpanId", "trace_id", "span_id", "parent_span_id") and \
                    isinstance(value, str) and len(value) in (16, 32) and _is_hex(value):
                doc[key] = base64.b64encode(binascii.unhexlify(value)).decode()
            elif isinstance(value, dict | list):
                _hex_ids_to_base64(value)
    elif isinstance(doc, list):
        for item in doc:
            _hex_ids_to_base64(item)


def _is_hex(text: str) -> bool:
    return all(c in "0123456789abcdefABCDEF" for c in text)


def _attributes(kvs: Any) -> dict[str, Any]:
    return {kv.key: _value(kv.value) for kv in kvs}


def _value(v: Any) -> Any:
    kind = v.WhichOneof("value")
    if kind == "array_value":
        return [_value(x) for x in v.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: _value(kv.value) for kv in v.kvlist_value.values}
    if kind == "bytes_value":
        return v.bytes_value.hex()
    return getattr(v, kind) if kind else None


# -- OpenInference → trace.v1 -----------------------------------------------------------------------------------

def _kind(span: Span) -> str:
    return str(span.attributes.get("openinference.span.kind", "")).upper()


def _first(spans: list[Span], key: str) -> Any:
    for s in spans:
        if key in s.attributes:
            return s.attributes[key]
    return None


def _ms(span: Span | None) -> float | None:
    return None if span is None else max(0.0, (span.end_ns - span.start_ns) / 1e6)


def _documents(span: Span) -> list[dict[str, Any]]:
    docs: dict[int, dict[str, Any]] = {}
    prefix = "retrieval.documents."
    for key, value in span.attributes.items():
        if not key.startswith(prefix):
            continue
        index, _, field = key[len(prefix):].partition(".")
        if index.isdigit():
            docs.setdefault(int(index), {})[field] = value
    out = []
    for rank, i in enumerate(sorted(docs), start=1):
        d = docs[i]
        meta = d.get("document.metadata")
        if isinstance(meta, str):
            try:
                meta = json.loads(meta)
            except ValueError:
                meta = None
        meta = meta if isinstance(meta, dict) else {}
        chunk = {"chunk_id": _scalar_text(d.get("document.id", f"doc-{i}"), f"retrieval.documents.{i}.document.id"),
                 "rank": rank,
                 "doc_id": str(meta.get("doc_id", "")), "doc_version": str(meta.get("doc_version", ""))}
        if "document.score" in d:  # never invented: without it the trace is refused, as a native one would be
            chunk["score"] = d["document.score"]
        if "document.content" in d:
            chunk["text"] = d["document.content"]
        out.append(chunk)
    return out


def _count(span: Span | None, key: str) -> int:
    """A token count: an integer attribute (or a float holding one); anything else makes the trace invalid."""
    value = 0 if span is None else span.attributes.get(key, 0)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{key} is {value!r}; expected an integer")
    return value


def _scalar_text(value: Any, key: str) -> str:
    """An id attribute as text: strings and integers only (an array's Python repr is not an id)."""
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise ValueError(f"{key} is {value!r}; expected a string")
    return str(value)


def build_document(spans: list[Span], *, incomplete: bool) -> bytes:
    """The trace.v1 JSON document for one trace's spans (validated afterwards by the native decoder)."""
    roots = [s for s in spans if not s.parent_span_id]
    root = min(roots, key=lambda s: s.start_ns) if roots else min(spans, key=lambda s: s.start_ns)
    ordered = [root] + sorted((s for s in spans if s is not root), key=lambda s: s.start_ns)
    retriever = next((s for s in ordered if _kind(s) == "RETRIEVER"), None)
    llm = next((s for s in ordered if _kind(s) == "LLM"), None)
    a = root.attributes
    latency = {"total": _ms(root)}
    if retriever is not None:
        latency["retrieve"] = _ms(retriever)
    if llm is not None:
        latency["generate"] = _ms(llm)
    tags = _first(ordered, "tag.tags")
    attributes = {"otel.trace_id": root.trace_id, "otel.span_count": str(len(spans))}
    if "resource.service.name" in a:
        attributes["service.name"] = str(a["resource.service.name"])
    if incomplete:
        attributes["ragmon.otlp.incomplete"] = "true"
    doc: dict[str, Any] = {
        "trace_id": root.trace_id,
        "query_id": str(_first(ordered, "ragmon.query_id") or _first(ordered, "session.id") or root.trace_id),
        "timestamp": datetime.fromtimestamp(root.start_ns / 1e9, UTC).isoformat(timespec="milliseconds")
        .replace("+00:00", "Z"),
        "retriever": {
            "name": str(_first(ordered, "ragmon.retriever.name") or (retriever.name if retriever else root.name)),
            "version": str(_first(ordered, "ragmon.retriever.version") or ""),
            "variant": str(_first(ordered, "ragmon.retriever.variant") or "production"),
        },
        "corpus_snapshot": str(_first(ordered, "ragmon.corpus_snapshot") or ""),
        "index_version": str(_first(ordered, "ragmon.index_version") or ""),
        "question": str(a.get("input.value") or (retriever.attributes.get("input.value") if retriever else "") or ""),
        "category": str(_first(ordered, "ragmon.category") or ""),
        "tags": [str(t) for t in tags] if isinstance(tags, list) else [],
        "tenant": str(_first(ordered, "ragmon.tenant") or ""),
        "retrieved": _documents(retriever) if retriever is not None else [],
        "answer": str(a.get("output.value") or (llm.attributes.get("output.value") if llm else "") or ""),
        "behaviour": str(_first(ordered, "ragmon.behaviour") or "answer"),
        "model": {"name": str(llm.attributes.get("llm.model_name", "")) if llm else "",
                  "version": str(_first(ordered, "ragmon.model_version") or "")},
        "latency_ms": latency,
        "tokens": {"prompt": _count(llm, "llm.token_count.prompt"), "completion": _count(llm, "llm.token_count.completion")},
        "error": next((s.status_error for s in ordered if s.status_error), ""),
        "attributes": attributes,
    }
    return json.dumps(doc, allow_nan=True).encode()
