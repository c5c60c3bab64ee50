"""``POST /v1/traces``: OTLP/HTTP export requests straight from an application's OpenTelemetry exporter.

Owns the HTTP side of the OTLP/HTTP protocol (opentelemetry.io/docs/specs/otlp, "OTLP/HTTP"): the bearer token,
the body limit (before and after decompression), ``Content-Encoding`` gzip/deflate, ``Content-Type``
``application/x-protobuf`` or ``application/json``, and the answers: 200 with an ``ExportTraceServiceResponse``
(its ``partial_success`` counts the spans refused: malformed ids or attributes), 400 for a body that is not an
export request, 401, 413, 415, and 503 with ``Retry-After`` while the ingest loop cannot take more (its queue is
full, store writes fail, the spool is full or cannot be written); exporters retry 503 and give up on 4xx.
Accepted means parsed, written to the spool and queued for the ingest loop (``HttpTraceSource``), which assembles,
validates, redacts and stores as for Kafka input: a 200 survives a crash of ragmon. It must not assemble or store
anything itself.
"""

from __future__ import annotations

import hmac
import zlib
from collections.abc import Callable

from fastapi import APIRouter, Request, Response
from fastapi.concurrency import run_in_threadpool
from google.protobuf import json_format

from ragmon.contracts.decode import Rejection
from ragmon.otlp.http_source import HttpTraceSource
from ragmon.otlp.metrics import OtlpMetrics
from ragmon.pipeline.spans.otlp import ParsedSpans, decode_request, request_spans
from ragmon.telemetry import Telemetry

PATH = "/v1/traces"
PROTOBUF, JSON = "application/x-protobuf", "application/json"
#: seconds an exporter is asked to wait before retrying a 503
RETRY_AFTER_SECONDS = 1


class _TooLarge(Exception):
    pass


def otlp_router(source: HttpTraceSource, *, token: str | None, max_body_bytes: int, telemetry: Telemetry) -> APIRouter:
    """The receiver's one route; each request is offered to ``source``. Registers the receiver's metrics
    (``OtlpMetrics``) on ``telemetry``."""
    router = APIRouter()
    expected = f"Bearer {token}".encode() if token else None
    metrics = telemetry.use(OtlpMetrics)
    count: Callable[[str], None] = lambda outcome: metrics.ingest_otlp_http_requests.labels(outcome).inc()  # noqa: E731

    @router.post(PATH, include_in_schema=False)
    async def traces(request: Request) -> Response:
        kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
        answer_json = kind == JSON
        if expected is not None:
            given = request.headers.get("authorization", "").encode()
            if not hmac.compare_digest(given, expected):
                count("unauthorized")
                return _status(401, "a bearer token is required: Authorization: Bearer <otlp.token>", answer_json,
                               {"WWW-Authenticate": 'Bearer realm="ragmon"'})
        if kind not in (PROTOBUF, JSON):
            count("unsupported")
            return _status(415, f"Content-Type {kind or 'missing'}: send {PROTOBUF} or {JSON}", answer_json)
        encoding = request.headers.get("content-encoding", "identity").strip().lower()
        if encoding not in ("identity", "", "gzip", "deflate"):
            count("unsupported")
            return _status(415, f"Content-Encoding {encoding}: send gzip, deflate or none", answer_json)
        declared = request.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > max_body_bytes:
            count("too_large")
            return _status(413, f"body of {declared} bytes is over otlp.max_body_bytes ({max_body_bytes})", answer_json)
        try:
            body = await _read(request, max_body_bytes)
            if encoding in ("gzip", "deflate"):
                body = _inflate(body, encoding, max_body_bytes)
        except _TooLarge:
            count("too_large")
            return _status(413, f"body over otlp.max_body_bytes ({max_body_bytes}), compressed or not", answer_json)
        except zlib.error as exc:
            count("invalid")
            return _status(400, f"the body is not valid {encoding} data: {exc}", answer_json)
        decoded = decode_request(body, "otlp_proto" if kind == PROTOBUF else "otlp_json")
        parsed = decoded if isinstance(decoded, Rejection) else request_spans(decoded, strict=False)
        if isinstance(parsed, Rejection):
            count("invalid")
            return _status(400, parsed.detail, answer_json)
        if parsed.spans:
            # in a worker thread: the spool writes to disk (a flush per request with otlp.spool_fsync)
            refused = await run_in_threadpool(source.offer, body, parsed.spans,
                                              fmt="otlp_proto" if kind == PROTOBUF else "otlp_json")
            if refused:
                count(refused if refused.startswith("spool") else "busy")
                return _status(503, _REFUSED.get(refused, _REFUSED["busy"]), answer_json,
                               {"Retry-After": str(RETRY_AFTER_SECONDS)})
        if parsed.rejected:
            metrics.ingest_otlp_http_spans_rejected.inc(parsed.rejected)
        count("partial" if parsed.rejected else "accepted")
        return _response(parsed, answer_json)

    return router


async def _read(request: Request, limit: int) -> bytes:
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise _TooLarge
    return bytes(body)


def _inflate(body: bytes, encoding: str, limit: int) -> bytes:
    """Decompress at most ``limit`` bytes (a small body may inflate to gigabytes)."""
    inflater = zlib.decompressobj(wbits=31 if encoding == "gzip" else 15)
    out = inflater.decompress(body, limit + 1)
    if len(out) > limit or inflater.unconsumed_tail:
        raise _TooLarge
    return out + inflater.flush()


def _response(parsed: ParsedSpans, as_json: bool) -> Response:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

    message = ExportTraceServiceResponse()
    if parsed.rejected:
        message.partial_success.rejected_spans = parsed.rejected
        message.partial_success.error_message = parsed.problem
    if as_json:
        return Response(json_format.MessageToJson(message, indent=None), media_type=JSON)
    return Response(message.SerializeToString(), media_type=PROTOBUF)


def _status(code: int, message: str, as_json: bool, headers: dict[str, str] | None = None) -> Response:
    """An error answer: a ``google.rpc.Status`` in the request's encoding, as OTLP/HTTP asks."""
    from google.rpc.status_pb2 import Status

    status = Status(code=_GRPC_CODES.get(code, 2), message=message)
    if as_json:
        return Response(json_format.MessageToJson(status, indent=None), status_code=code, media_type=JSON,
                        headers=headers)
    return Response(status.SerializeToString(), status_code=code, media_type=PROTOBUF, headers=headers)


#: the 503 answers, by why ``HttpTraceSource.offer`` refused
_REFUSED = {
    "busy": "ragmon cannot take more now (its queue is full or store writes fail); retry",
    "spool_full": "ragmon's spool of requests not yet stored is full (otlp.max_spool_bytes); retry",
    "spool_error": "ragmon cannot write its spool of requests (see its log); retry",
}

#: the gRPC status code matching each HTTP status (the Status message's ``code``)
_GRPC_CODES = {400: 3, 401: 16, 413: 8, 415: 3, 503: 14}
