"""Where traces go and come from: the ClickHouse store (``store``) and the Kafka source (``kafka``) sections.

Owns these two models and their checks (broker list form, complete SASL credentials). The DSN's grammar is
checked at load time by ``ragmon.store.dsn`` (see ``config.loading``), not here. Must not open a connection.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr, field_validator, model_validator

from ragmon.config.section import Section

DEFAULT_DSN = "chdb://./.ragmon/clickhouse"


class StoreSettings(Section):
    dsn: SecretStr = Field(
        SecretStr(DEFAULT_DSN),
        description="ClickHouse DSN: 'chdb:///abs/dir' or 'chdb://./rel/dir' for the embedded engine (default, on "
        "local disk) or 'http(s)://user:password@host:port/database' for a server. May contain a password: masked.",
    )
    dsn_file: Path | None = Field(None, description="Read the DSN from this file instead (a mounted Secret).")
    database: str = Field(
        "ragmon", pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,63}$",
        description="Database for ragmon's tables. A server DSN's path (…:8123/prod_db) names it too: both may be set "
        "only if they agree.",
    )
    cluster: str | None = Field(
        None,
        pattern=r"^[A-Za-z_][A-Za-z0-9_.-]{0,127}$",
        description="ClickHouse cluster name: DDL runs ON CLUSTER and tables use Replicated engines.",
    )
    traces_ttl_days: int = Field(90, ge=1, le=36500,
                                 description="Days to keep traces (and scores) before TTL deletes them.")
    drift_checks_ttl_days: int = Field(365, ge=1, le=36500, description="Days to keep drift check results.")
    connect_timeout_seconds: float = Field(10.0, gt=0, le=300, description="Connect timeout for a server store.")
    query_timeout_seconds: float = Field(60.0, gt=0, le=3600, description="Per-query timeout for a server store.")
    embedded_memory_mb: int = Field(
        1024, ge=128, le=1_048_576,
        description="Memory of the embedded engine (chDB), in MiB: its caches (mark cache 1/8, primary index 1/16, "
        "skip-index marks 1/32, condition and compiled-expression caches 1/32 each), at most half for background "
        "merges, and the engine's hard limit. The ragmon process needs about this plus 200–300 MB for Python "
        "(docs/operations.md, sizing). Unused with a server DSN.",
    )
    min_free_disk_mb: int = Field(
        128, ge=0, le=1_048_576,
        description="Embedded store only: free space, in MiB, kept on the data directory's file system (at most a "
        "tenth of its size). Below it ragmon pauses writes (inserts fail as retryable: ingest and score back off, "
        "/readyz says why) and stops the engine's merges, because the embedded engine ignores failed file writes "
        "and would keep incomplete parts; both resume once a quarter more is free. 0 switches the guard off "
        "(docs/operations.md, 'The disk').",
    )


class KafkaSettings(Section):
    bootstrap_servers: str = Field("127.0.0.1:9092", description="Comma-separated host:port list of Kafka brokers.")
    topic: str = Field("rag.traces", pattern=r"^[A-Za-z0-9._-]{1,249}$",
                       description="Topic the RAG app writes traces to.")
    group_id: str = Field("ragmon-ingest", min_length=1, description="Consumer group of the ingest role.")
    dead_letter_topic: str = Field(
        "rag.traces.dlq", pattern=r"^[A-Za-z0-9._-]{1,249}$",
        description="Where invalid messages go, with reason headers."
    )
    dead_letter_max_message_bytes: int = Field(
        1_000_000, ge=8_192, le=100_000_000,
        description="The largest dead letter (value and headers) produced whole; a larger one is cut to its first "
        "bytes, with the original's size and SHA-256 (reason too_large). Keep it below the dead-letter topic's "
        "max.message.bytes (Kafka's default: 1,048,588).",
    )
    input_format: Literal["auto", "native", "otlp_proto", "otlp_json"] = Field(
        "auto",
        description="Message encoding: native ragmon JSON traces, OTLP protobuf or OTLP JSON (as the OpenTelemetry "
        "Collector's Kafka exporter writes them); 'auto' tells them apart per message.",
    )
    security_protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = Field(
        "PLAINTEXT", description="Kafka security protocol."
    )
    sasl_mechanism: Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"] | None = Field(
        None, description="SASL mechanism.")
    sasl_username: str | None = Field(None, description="SASL user name.")
    sasl_password: SecretStr | None = Field(None, description="SASL password (masked).")
    sasl_password_file: Path | None = Field(None, description="Read the SASL password from this file.")
    session_timeout_ms: int = Field(30_000, ge=6_000, le=300_000, description="Consumer group session timeout.")
    max_poll_records: int = Field(5_000, ge=1, le=100_000, description="Upper bound on records returned per poll.")
    fetch_max_bytes: int = Field(52_428_800, ge=1_048_576, description="Upper bound on bytes per fetch response.")
    max_partition_fetch_bytes: int = Field(
        1_048_576, ge=65_536,
        description="Upper bound on bytes per partition per fetch (at least ingest.max_message_bytes).",
    )
    fetch_min_bytes: int = Field(
        262_144, ge=1, le=52_428_800,
        description="The broker answers a fetch once it has this many bytes (or after fetch_max_wait_ms): fewer, "
        "bigger fetches at a steady rate. At 1,500 traces/s the consumer took 49-50 µs of CPU per trace with "
        "256 KiB against 72-84 µs with 1 byte (kafka-python's default).",
    )
    fetch_max_wait_ms: int = Field(
        200, ge=0, le=60_000,
        description="The longest the broker holds a fetch waiting for fetch_min_bytes: adds at most this to freshness.",
    )

    @field_validator("bootstrap_servers")
    @classmethod
    def _host_port_list(cls, v: str) -> str:
        servers = [s.strip() for s in v.split(",") if s.strip()]
        if not servers:
            raise ValueError("give at least one broker as host:port, e.g. kafka-0:9092")
        for server in servers:
            host, colon, port = server.rpartition(":")
            if not colon or not host.strip("[]") or not port.isdigit() or not 0 < int(port) < 65536:
                raise ValueError(f"{server!r} is not host:port (e.g. kafka-0:9092, [::1]:9092)")
        return v

    @model_validator(mode="after")
    def _sasl_complete(self) -> KafkaSettings:
        if self.security_protocol.startswith("SASL_"):
            missing = [name for name, value in (("sasl_mechanism", self.sasl_mechanism),
                                                ("sasl_username", self.sasl_username),
                                                ("sasl_password", self.sasl_password or self.sasl_password_file))
                       if not value]
            if missing:
                raise ValueError(f"security_protocol {self.security_protocol} needs {', '.join(missing)} "
                                 "(sasl_password may come from sasl_password_file)")
        return self
