"""The ``otlp`` section: the OTLP/HTTP receiver that takes ``POST /v1/traces`` straight from an application's
OpenTelemetry exporter (``ragmon run``, ``ragmon ingest --otlp-http``), without Kafka or a Collector.

Owns the model: where it listens, the bearer token, body and queue limits, the spool that keeps accepted requests
until they are stored, and where its dead letters go. The token may come from a file (``token_file``, read at load
time like every ``*_file`` secret). Must not bind a port nor open the spool.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, SecretStr, field_validator, model_validator

from ragmon.config.section import Section

#: ``otlp.dead_letters`` value that sends dead letters to ``kafka.dead_letter_topic``
KAFKA_DEAD_LETTERS = "kafka"


class OtlpSettings(Section):
    host: str = Field("127.0.0.1", description="Address the OTLP/HTTP receiver binds (0.0.0.0 for every interface).")
    port: int = Field(4318, ge=0, le=65535,
                      description="Port of POST /v1/traces (4318 is OTLP/HTTP's; 0 picks a free one).")
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
    spool_dir: Path | None = Field(
        None,
        description="Where each accepted request is written before it is answered 200, until every trace that used "
        "it is stored or dead-lettered; a restart, even after kill -9, replays what was not. Unset: "
        "otlp-spool/<store.database> beside the embedded store's directory (.ragmon/otlp-spool/ragmon by default), "
        "or .ragmon/otlp-spool/<store.database> with a ClickHouse server. One process per directory.",
    )
    max_spool_bytes: int = Field(
        1_073_741_824, ge=1_048_576,
        description="Bound on the spool: requests not yet stored, and those held by traces still assembling (up to "
        "ingest.otlp_max_query_seconds of traffic). Past it requests get 503 with Retry-After (the exporter "
        "retries). At least max_body_bytes.",
    )
    spool_fsync: bool = Field(
        False,
        description="Flush each request to the disk before answering 200. Without it a request survives a crash of "
        "ragmon (kill -9, out of memory) but not of the machine; with it, a power loss too, at the cost of a disk "
        "flush per request.",
    )
    dead_letters: str = Field(
        ".ragmon/otlp-dead-letters.jsonl", min_length=1,
        description="Where traces that fail validation go: a JSON Lines file (appended; '-' for standard output), "
        f"or '{KAFKA_DEAD_LETTERS}' for kafka.dead_letter_topic.",
    )

    @model_validator(mode="after")
    def _spool_holds_a_request(self) -> OtlpSettings:
        if self.max_spool_bytes < self.max_body_bytes:
            raise ValueError(f"max_spool_bytes ({self.max_spool_bytes}) must be at least max_body_bytes "
                             f"({self.max_body_bytes}): the spool must hold the largest request")
        return self

    @field_validator("host")
    @classmethod
    def _host(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("an address to bind, e.g. 127.0.0.1 or 0.0.0.0")
        return v
