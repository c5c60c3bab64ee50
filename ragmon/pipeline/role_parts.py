"""The trace loop as a role hands it to the process: the part of ``build`` the ingest and otlp roles share.

``pipeline_role`` puts an ``IngestPipeline`` over the source and dead-letter sink the role opened (writing through
``StoreTraceWriter``, with the fault points of ``RAGMON_FAULTS``) and the ``RoleParts`` around it: liveness is the loop
having polled its source within ``process.ingest_liveness_limit``, readiness is writes succeeding (while they fail,
it says what the role's input does meanwhile). Must not open a source, a sink or the store, nor bind a port: the role
and ``ragmon.process`` do.
"""

from __future__ import annotations

from typing import Any

from ragmon.config import Settings
from ragmon.daemon import Listener, RoleParts
from ragmon.pipeline.faults import FaultPoints
from ragmon.pipeline.loop import IngestPipeline
from ragmon.pipeline.writer import StoreTraceWriter
from ragmon.server import heartbeat_check
from ragmon.stream.dead_letter import DeadLetterSink
from ragmon.stream.source import TraceSource
from ragmon.telemetry import Telemetry


def pipeline_role(settings: Settings, store: Any, telemetry: Telemetry, source: TraceSource,
                  dead_letters: DeadLetterSink, *, input_format: str, while_failing: str, polled: str, on_stuck: str,
                  name: str = "ingest", listeners: tuple[Listener, ...] = ()) -> RoleParts:
    """The loop (``name``: its name in health checks and metrics) and its parts. ``while_failing`` completes "writes
    failing, …" in the readiness text, ``polled`` names the liveness beat ("last poll"), ``on_stuck`` what a loop
    still running after the grace period leaves behind."""
    pipeline = IngestPipeline(source, StoreTraceWriter(store), dead_letters, settings.ingest, telemetry,
                              input_format=input_format, retention_days=settings.store.traces_ttl_days,
                              faults=FaultPoints.from_env(), name=name)
    max_age = settings.process.ingest_liveness_limit(settings.store.query_timeout_seconds)

    def writing() -> tuple[bool, str]:
        if pipeline.paused:
            return False, f"writes failing, {while_failing}: {pipeline.last_error}"
        return True, "writes succeed"

    return RoleParts(loops=(pipeline,), service=pipeline, readiness=writing,
                     liveness=heartbeat_check(lambda: pipeline.last_poll, max_age, polled), listeners=listeners,
                     on_stuck=on_stuck)
