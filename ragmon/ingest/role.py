"""The ingest role as a process starts it: Kafka source, dead-letter producer, store writer, health checks.

``check(settings)`` and ``build(settings, store, telemetry) -> RoleParts`` have the shape every role package's
``role.py`` has; ``ragmon.process`` calls them for ``ragmon ingest`` and ``ragmon run``. Everything that can be
checked before the loop starts is checked here (config, broker reachable), so a bad setup fails fast with a
message that says what to do, never later inside the loop. Must not open the store or bind a port.
"""

from __future__ import annotations

import logging
from typing import Any

from ragmon.config import Settings
from ragmon.daemon import RoleParts
from ragmon.errors import ConfigError
from ragmon.pipeline.faults import FaultPoints
from ragmon.pipeline.intake import redaction_problems
from ragmon.pipeline.role_parts import pipeline_role
from ragmon.stream.dead_letter import KafkaDeadLetterSink
from ragmon.stream.source import KafkaTraceSource
from ragmon.telemetry import Telemetry

log = logging.getLogger("ragmon.ingest")


def check(settings: Settings) -> None:
    """Raise ``ConfigError`` with the problems the pydantic models cannot see on their own (one line each)."""
    problems = redaction_problems(settings)
    try:
        FaultPoints.from_env()
    except ValueError as exc:
        problems.append(str(exc))
    if settings.kafka.dead_letter_topic == settings.kafka.topic:
        problems.append("kafka.dead_letter_topic: must differ from kafka.topic (dead letters would be re-read)")
    if settings.ingest.max_message_bytes > settings.kafka.max_partition_fetch_bytes:
        problems.append(f"ingest.max_message_bytes ({settings.ingest.max_message_bytes}) exceeds "
                        f"kafka.max_partition_fetch_bytes ({settings.kafka.max_partition_fetch_bytes}); raise the "
                        "latter")
    if problems:
        raise ConfigError(problems)


def build(settings: Settings, store: Any, telemetry: Telemetry) -> RoleParts:
    """The pipeline with its liveness (the consume loop polled recently) and readiness (writes succeed)
    (``ragmon.pipeline.role_parts``). Raises ``RagmonError`` on bad setup."""
    check(settings)
    source = KafkaTraceSource(settings.kafka)
    try:
        dead_letters = KafkaDeadLetterSink(settings.kafka)
    except Exception:
        source.close()
        raise
    return pipeline_role(settings, store, telemetry, source, dead_letters, input_format=settings.kafka.input_format,
                         while_failing="consumption paused", polled="last poll",
                         on_stuck="uncommitted messages will be re-read on the next start (nothing is lost)")
