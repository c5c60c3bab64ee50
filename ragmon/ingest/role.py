"""Wiring the ingest role from settings: Kafka source, dead-letter producer, store writer, health checks.

Owns start-up for ``ragmon ingest`` and ``ragmon run``: everything that can be checked before the loop starts
is checked here (config, broker reachable, store reachable), so a bad setup fails fast with a message that
says what to do, and never later inside the loop.
"""

from __future__ import annotations

import logging
from typing import Any

from ragmon.config import Settings
from ragmon.errors import ConfigError
from ragmon.ingest.dead_letter import KafkaDeadLetterSink
from ragmon.ingest.faults import FaultPoints
from ragmon.ingest.pipeline import IngestPipeline
from ragmon.ingest.redact import Redactor
from ragmon.ingest.source import KafkaTraceSource
from ragmon.ingest.writer import StoreTraceWriter
from ragmon.server import Health, heartbeat_check
from ragmon.telemetry import Telemetry

log = logging.getLogger("ragmon.ingest")


def check_settings(settings: Settings) -> list[str]:
    """Problems the pydantic models cannot see on their own (one line each)."""
    problems = []
    try:
        Redactor(settings.ingest.redact_patterns, settings.ingest.redact_fields)
    except ValueError as exc:
        problems.append(f"ingest.redact_fields: {exc}")
    try:
        FaultPoints.from_env()
    except ValueError as exc:
        problems.append(str(exc))
    if settings.kafka.dead_letter_topic == settings.kafka.topic:
        problems.append("kafka.dead_letter_topic: must differ from kafka.topic (dead letters would be re-read)")
    if settings.ingest.max_message_bytes > settings.kafka.max_partition_fetch_bytes:
        problems.append(f"ingest.max_message_bytes ({settings.ingest.max_message_bytes}) exceeds "
                        f"kafka.max_partition_fetch_bytes ({settings.kafka.max_partition_fetch_bytes}); raise the latter")
    return problems


def build_ingest(settings: Settings, store: Any, telemetry: Telemetry, health: Health) -> IngestPipeline:
    """Create the pipeline and register its /healthz and /readyz checks. Raises ``RagmonError`` on bad setup."""
    problems = check_settings(settings)
    if problems:
        raise ConfigError(problems)
    source = KafkaTraceSource(settings.kafka)
    try:
        dead_letters = KafkaDeadLetterSink(settings.kafka)
    except Exception:
        source.close()
        raise
    pipeline = IngestPipeline(
        source, StoreTraceWriter(store), dead_letters, settings.ingest, telemetry,
        input_format=settings.kafka.input_format, retention_days=settings.store.traces_ttl_days,
        faults=FaultPoints.from_env(),
    )
    max_age = max(60.0, 2 * settings.store.query_timeout_seconds)
    health.add_liveness("ingest_loop", heartbeat_check(lambda: pipeline.last_poll, max_age, "last poll"))

    def store_ready() -> tuple[bool, str]:
        if pipeline.paused:
            return False, f"writes failing, consumption paused: {pipeline.last_error}"
        return store.readiness()

    health.add_readiness("store", store_ready)
    return pipeline
