"""The ``otlp`` section: the OTLP/HTTP receiver that takes ``POST /v1/traces`` straight from an application's
OpenTelemetry exporter (``ragmon run``, ``ragmon ingest --otlp-http``), without Kafka or a Collector.

Owns the model: where it listens, the bearer token, body and queue limits, and where its dead letters go. The
token may come from a file (``token_file``, read at load time like every ``*_file`` secret). Must not bind a port.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, SecretStr, field_validator

from ragmon.config.section import Section

#: ``otlp.dead_letters`` value that sends dead letters to ``kafka.dead_letter_topic``
KAFKA_DEAD_LETTERS = "kafka"


class OtlpSettings(Section):
    host: str = Field("127.0.0.1", description="Address the OTLP/HTTP receiver binds (0.0.0.0 for every interface).")
    port: int = Field(4318, ge=0, le=65535, description="Port of POST /v1/traces (4318 is OTLP/HTTP's; 0 picks a free one).")
    token: SecretStr | None = Field(
        None, description="When set, requests need 'Authorization: Bearer <token>'; without it, anyone who reaches "
        "the port may send traces (keep host on loopback then).",
    )
    token_file: Path | None = Field(None, description="Read the bearer token from this file (a mounted Secret).")
    max_body_bytes: int = Field(
        20_971_520, ge=1_024, le=1_073_741_824,
        description="Largest request body accepted, compressed and again after gzip/deflate (413 beyond it).",
    )
    max_queued_bytes: int = Field(
        67_108_864, ge=1_048_576,
        description="Bound on request bytes accepted but not yet taken by the ingest loop; past it, and while "
        "store writes fail, requests get 503 with Retry-After (the exporter retries).",
    )
    dead_letters: str = Field(
        ".ragmon/otlp-dead-letters.jsonl", min_length=1,
        description="Where traces that fail validation go: a JSON Lines file (appended; '-' for standard output), "
        f"or '{KAFKA_DEAD_LETTERS}' for kafka.dead_letter_topic.",
    )

    @field_validator("host")
    @classmethod
    def _host(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("an address to bind, e.g. 127.0.0.1 or 0.0.0.0")
        return v
