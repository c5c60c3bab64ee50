"""The ingest rig: the trace loop over the in-memory source, writer and dead-letter sink (the ``rig`` fixture, which
tests/unit/pipeline/conftest.py and tests/unit/otlp/conftest.py make available), and the trace helpers its tests
share."""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from ragmon.config import IngestSettings
from ragmon.pipeline.loop import IngestPipeline
from ragmon.pipeline.writer import InMemoryTraceWriter, TraceWriter
from ragmon.stream.dead_letter import InMemoryDeadLetterSink
from ragmon.stream.source import InMemoryTraceSource
from ragmon.telemetry import Telemetry
from tests.conftest import make_trace

#: the seed of the pipeline's random source (its backoff jitter)
SEED = 0


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@dataclass
class Rig:
    pipeline: IngestPipeline
    source: InMemoryTraceSource
    writer: InMemoryTraceWriter
    dlq: InMemoryDeadLetterSink
    clock: FakeClock
    telemetry: Telemetry

    def drive(self, steps: int = 50, advance: float = 0.3) -> None:
        """Run the loop ``steps`` times, moving the fake clock so time-based flushes and retries happen."""
        for _ in range(steps):
            self.pipeline.step()
            self.clock.advance(advance)
        # with concurrent writes the writer thread runs in real time: let a write still in flight (or its
        # retry) finish, without running the loop forever
        for _ in range(steps):
            self.pipeline.drain()
            if not self._busy():
                break
            self.pipeline.step()
            self.clock.advance(advance)

    def _busy(self) -> bool:
        p = self.pipeline
        return p.paused or not p.idle() and p.ledger.pending() > 0

    def metric(self, name: str, labels: dict[str, str] | None = None) -> float:
        return self.telemetry.registry.get_sample_value(name, labels or {}) or 0.0


@pytest.fixture
def rig(monkeypatch: pytest.MonkeyPatch) -> Callable[..., Rig]:
    # time moves by the fake clock; a source with nothing to give (the OTLP/HTTP queue) would still block each step
    # for the loop's real poll wait: shorten it, nothing here depends on its length
    monkeypatch.setattr("ragmon.pipeline.loop.MAX_POLL_SECONDS", 0.01)

    def make(*, source: InMemoryTraceSource | None = None, writer: InMemoryTraceWriter | None = None,
             write: TraceWriter | None = None, **settings: Any) -> Rig:
        """A pipeline over fresh doubles, or over ``source`` / ``writer`` given (a restarted process); ``write``
        stands in for the writer the pipeline calls (``writer`` stays the store the rig reads)."""
        input_format = settings.pop("input_format", "auto")
        concurrent = settings.pop("concurrent_writes", False)  # inline writes keep most tests deterministic
        base: dict[str, Any] = {"max_batch_rows": 50, "flush_interval_seconds": 1.0, "store_retry_max_seconds": 2.0}
        base.update(settings)
        source = source if source is not None else InMemoryTraceSource()
        writer = writer if writer is not None else InMemoryTraceWriter()
        dlq, clock, tel = InMemoryDeadLetterSink(), FakeClock(), Telemetry()
        pipeline = IngestPipeline(source, write or writer, dlq, IngestSettings(**base), tel, input_format=input_format,
                                  concurrent_writes=concurrent, clock=clock, rng=random.Random(SEED))
        return Rig(pipeline, source, writer, dlq, clock, tel)

    return make


def trace_bytes(**overrides: Any) -> bytes:
    return json.dumps(make_trace(**overrides)).encode()
