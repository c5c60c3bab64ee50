"""An instrumented RAG application, run as its own process by the operations harness.

The REAL llama-index-core with the REAL OpenInference instrumentation (``tests/support/llamaindex_app.py``: fake
LLM, hashing embeddings, no model) answers the questions of a plan, each at its time, several at once, each LLM
call lasting as long as the plan says (100 ms to minutes). Its spans leave through the OpenTelemetry SDK's batch
processor and OTLP/HTTP exporter to ONE endpoint: the Collector (which writes them to Kafka) or the daemon's
``/v1/traces``. One process per endpoint, since an instrumentor patches its framework once, for one provider.

    python -m tests.support.operations.rag_app --endpoint URL --plan plan.json --out sent.jsonl

``plan.json`` is a list of ``{"at": seconds after start, "llm_seconds": s, "question": q}``. ``sent.jsonl`` gets
one JSON object per line, written as things happen: ``{"kind": "root", …}`` for every trace the application
started (index building at start-up makes two that are not queries), ``{"kind": "query", …}`` when a query
returned, ``{"kind": "export", "ok": …, "traces": {trace id: spans}}`` per export, ``{"kind": "done", …}`` at the
end. An export the endpoint refuses (503 while the daemon's store fails, nobody listening while it restarts) is
retried for up to ``--patience`` seconds, as an application's exporter with a persistent queue would (the SDK's
own gives up after ~10 s); every attempt's outcome is written, so the harness knows exactly which spans were
answered 200. Test plumbing only.
"""

from __future__ import annotations

import argparse
import json
import threading
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from opentelemetry.context import Context
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult


class Journal:
    """Append-only JSON lines, flushed at once (the harness may read them while the app runs)."""

    def __init__(self, path: Path):
        self._file = path.open("a", encoding="utf-8")
        self._lock = threading.Lock()

    def write(self, **record: Any) -> None:
        with self._lock:
            self._file.write(json.dumps(record) + "\n")
            self._file.flush()

    def close(self) -> None:
        self._file.close()


class Roots(SpanProcessor):
    """Which trace each thread's root span started (the query's trace id), and how many spans each trace ended."""

    def __init__(self, journal: Journal):
        self.journal = journal
        self.by_thread: dict[int, str] = {}
        self.spans: Counter[str] = Counter()
        self._lock = threading.Lock()

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        if span.parent is None:
            trace_id = f"{span.context.trace_id:032x}"
            with self._lock:
                self.by_thread[threading.get_ident()] = trace_id
            self.journal.write(kind="root", trace_id=trace_id, name=span.name, at=time.time())

    def on_end(self, span: ReadableSpan) -> None:
        with self._lock:
            self.spans[f"{span.context.trace_id:032x}"] += 1

    def shutdown(self) -> None:
        pass

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return True


class PatientExporter(SpanExporter):
    """The SDK's exporter, retried until the endpoint answers 200 or ``patience`` seconds have passed."""

    def __init__(self, inner: SpanExporter, journal: Journal, patience: float):
        self.inner, self.journal, self.patience = inner, journal, patience

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        traces = Counter(f"{s.context.trace_id:032x}" for s in spans)
        deadline, pause, attempts = time.monotonic() + self.patience, 0.5, 0
        while True:
            attempts += 1
            result = self.inner.export(spans)
            if result == SpanExportResult.SUCCESS or time.monotonic() > deadline:
                ok = result == SpanExportResult.SUCCESS
                self.journal.write(kind="export", ok=ok, at=time.time(), attempts=attempts, traces=dict(traces))
                return result
            time.sleep(pause)
            pause = min(pause * 2, 5.0)

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return True


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--endpoint", required=True, help="OTLP/HTTP traces URL (…/v1/traces)")
    parser.add_argument("--plan", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--patience", type=float, default=240.0, help="seconds an export is retried")
    args = parser.parse_args(argv)
    plan = json.loads(args.plan.read_text(encoding="utf-8"))
    journal = Journal(args.out)

    from tests.support.instrumented import exporting, tap
    from tests.support.llamaindex_app import App

    roots = Roots(journal)
    tap().attach(roots)
    local = threading.local()
    exporter = PatientExporter(OTLPSpanExporter(endpoint=args.endpoint, timeout=10), journal, args.patience)
    processor = BatchSpanProcessor(exporter, schedule_delay_millis=200, max_queue_size=20_000)
    with exporting(processor):
        app = App()  # its index building: two traces
        # every LLM call lasts as long as the plan says for the query asking (a thread-local: queries overlap)
        app.llm.thinking = lambda: time.sleep(getattr(local, "llm_seconds", 0.0))
        start = time.time()
        journal.write(kind="start", at=start)

        def ask(entry: dict[str, Any]) -> None:
            local.llm_seconds = float(entry["llm_seconds"])
            began = time.time()
            sent = app.query(entry["question"])
            journal.write(kind="query", trace_id=roots.by_thread[threading.get_ident()], question=sent.question,
                          answer=sent.answer, llm_seconds=local.llm_seconds, started=began, ended=time.time())

        threads = []
        for entry in sorted(plan, key=lambda e: e["at"]):
            time.sleep(max(0.0, start + float(entry["at"]) - time.time()))
            thread = threading.Thread(target=ask, args=(entry,), daemon=True)
            thread.start()
            threads.append(thread)
        for thread in threads:
            thread.join()
        processor.force_flush(int((args.patience + 30) * 1000))
    journal.write(kind="done", at=time.time(), spans=dict(roots.spans))
    journal.close()


if __name__ == "__main__":
    main()
