"""The REAL OpenInference instrumentations (LlamaIndex, LangChain) installed once per test process, and where
their spans go.

An instrumentor patches its framework globally, once, with one tracer provider. ``tap()`` is that provider's span
processor: it forwards each finished span to the processors attached at the time (none: the span is dropped), so a
test captures spans in memory (``capture()``) or exports them to a Collector or to ragmon over OTLP/HTTP
(``exporting()``) with the SDK's own processors and exporter.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from opentelemetry.context import Context
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

SERVICE = "rag-app"


class SpanTap(SpanProcessor):
    """Forwards spans to the processors attached now."""

    def __init__(self) -> None:
        self._targets: list[SpanProcessor] = []
        self._lock = threading.Lock()

    def attach(self, processor: SpanProcessor) -> None:
        with self._lock:
            self._targets = [*self._targets, processor]

    def detach(self, processor: SpanProcessor) -> None:
        with self._lock:
            self._targets = [t for t in self._targets if t is not processor]

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        for t in self._targets:
            t.on_start(span, parent_context)

    def on_end(self, span: ReadableSpan) -> None:
        for t in self._targets:
            t.on_end(span)

    def shutdown(self) -> None:
        pass

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return all(t.force_flush(timeout_millis) for t in self._targets)


_tap: SpanTap | None = None
_lock = threading.Lock()


def tap() -> SpanTap:
    """Instrument LlamaIndex and LangChain (first call only) and return the processor their spans pass through."""
    global _tap
    with _lock:
        if _tap is None:
            from openinference.instrumentation.langchain import LangChainInstrumentor
            from openinference.instrumentation.llama_index import LlamaIndexInstrumentor

            provider = TracerProvider(resource=Resource.create({"service.name": SERVICE}))
            _tap = SpanTap()
            provider.add_span_processor(_tap)
            LlamaIndexInstrumentor().instrument(tracer_provider=provider)
            LangChainInstrumentor().instrument(tracer_provider=provider)
        return _tap


@contextmanager
def capture() -> Iterator[InMemorySpanExporter]:
    """Keep every span finished inside the block (the SDK's in-memory exporter)."""
    exporter = InMemorySpanExporter()
    processor = SimpleSpanProcessor(exporter)
    t = tap()
    t.attach(processor)
    try:
        yield exporter
    finally:
        t.detach(processor)


@contextmanager
def exporting(processor: SpanProcessor) -> Iterator[SpanProcessor]:
    """Send every span finished inside the block through ``processor`` (e.g. a ``BatchSpanProcessor`` over the
    SDK's ``OTLPSpanExporter``); flushed and shut down at the end."""
    t = tap()
    t.attach(processor)
    try:
        yield processor
    finally:
        t.detach(processor)
        processor.force_flush()
        processor.shutdown()
