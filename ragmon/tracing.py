"""Self-tracing: ragmon's own work as OpenTelemetry spans, exported over OTLP/HTTP when configured.

Owns the process's tracer provider. Off unless the standard OpenTelemetry environment names an endpoint
(``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` or ``OTEL_EXPORTER_OTLP_ENDPOINT``) and ``OTEL_SDK_DISABLED`` is not
``true``; then the SDK's OTLP/HTTP exporter reads the rest of its settings (headers, timeout, compression,
certificates) from the same standard variables, and ``OTEL_SERVICE_NAME`` / ``OTEL_RESOURCE_ATTRIBUTES`` name the
service (``ragmon`` by default). Spans are exported in batches by a background thread and flushed at exit.

Spans are one per unit of work, never one per trace, so tracing costs nothing measurable on the ingest hot
path: a batch insert, a dead-letter produce, a scoring batch, a judge call, a drift check, a gate run. Their
attributes are counts, names and versions; never trace text, questions, answers or credentials.
"""

from __future__ import annotations

import atexit
import os
from contextlib import AbstractContextManager
from typing import Any

from opentelemetry import trace

from ragmon import __version__

#: the tracer every ragmon module uses (a no-op until ``setup_tracing`` installs a provider)
tracer = trace.get_tracer("ragmon", __version__)

_ENDPOINT_VARS = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
_TIMEOUT_VARS = ("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "OTEL_EXPORTER_OTLP_TIMEOUT")
#: how long one export (with its retries) may take unless OTEL_EXPORTER_OTLP_*TIMEOUT says otherwise. The SDK's
#: 10 s default made a one-shot command wait ~7 s at exit for a collector that is down (measured); spans are
#: diagnostics, never worth holding up a command or a shutdown for.
EXPORT_TIMEOUT_SECONDS = 2.0
_installed = False


def tracing_enabled(environ: dict[str, str] | None = None) -> bool:
    """True when the environment asks for spans: an OTLP endpoint is set and the SDK is not disabled."""
    env = os.environ if environ is None else environ
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    return any(env.get(name, "").strip() for name in _ENDPOINT_VARS)


def setup_tracing(command: str) -> bool:
    """Install an OTLP/HTTP span exporter for this process when the environment asks for one (once).

    ``command`` (e.g. ``ingest``) becomes the ``ragmon.command`` resource attribute, so one collector can tell
    the roles apart. Returns whether tracing is on.
    """
    global _installed
    if _installed or not tracing_enabled():
        return _installed
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import SERVICE_NAME, SERVICE_VERSION, Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    resource = Resource.create({SERVICE_VERSION: __version__, "ragmon.command": command})
    if resource.attributes.get(SERVICE_NAME, "").startswith("unknown_service"):
        resource = resource.merge(Resource({SERVICE_NAME: "ragmon"}))
    provider = TracerProvider(resource=resource)
    timeout = None if any(os.environ.get(name, "").strip() for name in _TIMEOUT_VARS) else EXPORT_TIMEOUT_SECONDS
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(timeout=timeout)))
    trace.set_tracer_provider(provider)
    atexit.register(provider.shutdown)  # flush what is queued when the process ends normally
    _installed = True
    return True


def span(name: str, attributes: dict[str, Any] | None = None, *,
         kind: trace.SpanKind = trace.SpanKind.INTERNAL) -> AbstractContextManager[trace.Span]:
    """A span around one unit of work; an exception leaving it is recorded and marks the span as an error."""
    return tracer.start_as_current_span(name, kind=kind, attributes=attributes)
