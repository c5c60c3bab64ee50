"""OTLP trace payloads (protobuf and JSON) → spans.

Owns: telling native JSON from OTLP per message (``detect_format``), parsing an ``ExportTraceServiceRequest``
as the OpenTelemetry Collector's Kafka exporter writes it, or an OTLP/HTTP client posts it (``otlp_proto``:
binary protobuf; ``otlp_json``: OTLP/JSON with hex ids, also the base64 ids of protobuf's json_format), into
``Span`` records. It never raises on input: a payload that is not OTLP is a ``Rejection``. It must not buffer
spans (``otlp_assembly`` does) nor interpret OpenInference attributes (``openinference`` does).
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from dataclasses import dataclass
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
_SKIPPED_SUFFIX = ".embedding.vector"
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
    """Parse one message; never raises. A span with malformed ids rejects the whole message."""
    if len(data) > max_bytes:
        return Rejection("too_large", f"message is {len(data)} bytes, over the limit of {max_bytes}")
    request = decode_request(data, fmt)
    if isinstance(request, Rejection):
        return request
    result = request_spans(request, strict=True)
    return result if isinstance(result, Rejection) else result.spans


@dataclass(frozen=True, slots=True)
class ParsedSpans:
    """The spans of a request, and those refused (``strict=False``): their count and the first problem."""

    spans: list[Span]
    rejected: int = 0
    problem: str = ""


def decode_request(data: bytes, fmt: str) -> Any:
    """An ``ExportTraceServiceRequest`` from protobuf (``otlp_proto``) or OTLP/JSON bytes, or a ``Rejection``."""
    from google.protobuf import json_format
    from google.protobuf.message import DecodeError
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

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
    return request


def request_spans(request: Any, *, strict: bool) -> ParsedSpans | Rejection:
    """The request's spans. A span with malformed ids or attributes is a ``Rejection`` of the whole request when
    ``strict`` (a Kafka message goes to the dead letters whole), else left out and counted (OTLP/HTTP answers
    with ``partial_success``)."""
    spans: list[Span] = []
    rejected, problem = 0, ""
    for rs in request.resource_spans:
        try:
            resource = _attributes(rs.resource.attributes)
        except (ValueError, TypeError) as exc:
            resource, bad = {}, f"malformed resource attributes: {exc}"[:400]
            if strict:
                return Rejection("invalid_otlp", bad)
            problem = problem or bad
        kept = {f"resource.{k}": resource[k] for k in RESOURCE_ATTRIBUTES if k in resource}
        for ss in rs.scope_spans:
            for s in ss.spans:
                if len(s.trace_id) != 16 or len(s.span_id) != 8:
                    bad = (f"span {s.name!r} has a trace id of {len(s.trace_id)} bytes and a span id of "
                           f"{len(s.span_id)} bytes; expected 16 and 8")
                elif s.parent_span_id and len(s.parent_span_id) != 8:
                    bad = f"span {s.name!r} has a parent span id of {len(s.parent_span_id)} bytes; expected 8"
                else:
                    try:
                        attrs = dict(kept)  # not every resource attribute: N of them on N spans would be N² entries
                        attrs.update(_attributes(s.attributes))
                        spans.append(Span(
                            s.trace_id.hex(), s.span_id.hex(), s.parent_span_id.hex() if s.parent_span_id else "",
                            s.name, int(s.start_time_unix_nano), int(s.end_time_unix_nano), attrs,
                            s.status.message or "error" if s.status.code == 2 else "",
                        ))
                        continue
                    except (ValueError, TypeError) as exc:
                        bad = f"malformed span {s.name!r}: {exc}"[:400]
                if strict:
                    return Rejection("invalid_otlp", bad)
                rejected += 1
                problem = problem or bad
    return ParsedSpans(spans, rejected, problem)


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
    # embedding vectors (OpenInference's embedding.embeddings.N.embedding.vector) are never read: not decoding them
    # keeps thousands of Python floats per embedding call out of the assembly buffers
    return {kv.key: _value(kv.value) for kv in kvs if not kv.key.endswith(_SKIPPED_SUFFIX)}


def _value(v: Any) -> Any:
    kind = v.WhichOneof("value")
    if kind == "array_value":
        return [_value(x) for x in v.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: _value(kv.value) for kv in v.kvlist_value.values}
    if kind == "bytes_value":
        return v.bytes_value.hex()
    return getattr(v, kind) if kind else None
