"""Settings: one pydantic-settings model per section, loaded from YAML (``--config``) and the environment.

Environment variables are ``RAGMON_<SECTION>__<FIELD>`` (e.g. ``RAGMON_STORE__DSN``) and win over the file.
Secrets are ``SecretStr`` (masked by ``config show`` and in logs); each secret may also be read from a file
named by its ``*_file`` sibling, so Kubernetes Secrets can be mounted. ``load_settings`` validates everything
at start-up and raises ``ConfigError`` with one line per problem. Field names carry their unit.
"""

from __future__ import annotations

import os
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict, SettingsError

from ragmon.errors import ConfigError

DEFAULT_DSN = "chdb://./.ragmon/clickhouse"
#: a config with thousands of wrong list items still fits on a screen
MAX_PROBLEM_LINES = 30


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_default=True)


class StoreSettings(_Section):
    dsn: SecretStr = Field(
        SecretStr(DEFAULT_DSN),
        description="ClickHouse DSN: 'chdb:///abs/dir' or 'chdb://./rel/dir' for the embedded engine (default, on local disk) or "
        "'http(s)://user:password@host:port/database' for a server. May contain a password: masked.",
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
    traces_ttl_days: int = Field(90, ge=1, le=36500, description="Days to keep traces (and scores) before TTL deletes them.")
    drift_checks_ttl_days: int = Field(365, ge=1, le=36500, description="Days to keep drift check results.")
    connect_timeout_seconds: float = Field(10.0, gt=0, le=300, description="Connect timeout for a server store.")
    query_timeout_seconds: float = Field(60.0, gt=0, le=3600, description="Per-query timeout for a server store.")


class KafkaSettings(_Section):
    bootstrap_servers: str = Field("127.0.0.1:9092", description="Comma-separated host:port list of Kafka brokers.")
    topic: str = Field("rag.traces", pattern=r"^[A-Za-z0-9._-]{1,249}$", description="Topic the RAG app writes traces to.")
    group_id: str = Field("ragmon-ingest", min_length=1, description="Consumer group of the ingest role.")
    dead_letter_topic: str = Field(
        "rag.traces.dlq", pattern=r"^[A-Za-z0-9._-]{1,249}$", description="Where invalid messages go, with reason headers."
    )
    input_format: Literal["auto", "native", "otlp_proto", "otlp_json"] = Field(
        "auto",
        description="Message encoding: native ragmon JSON traces, OTLP protobuf or OTLP JSON (as the OpenTelemetry "
        "Collector's Kafka exporter writes them); 'auto' tells them apart per message.",
    )
    security_protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = Field(
        "PLAINTEXT", description="Kafka security protocol."
    )
    sasl_mechanism: Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"] | None = Field(None, description="SASL mechanism.")
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


class IngestSettings(_Section):
    max_batch_rows: int = Field(10_000, ge=1, le=1_000_000, description="Flush a batch at this many traces.")
    max_batch_bytes: int = Field(33_554_432, ge=1_024, description="Flush a batch at this many message bytes.")
    flush_interval_seconds: float = Field(1.0, gt=0, le=300, description="Flush a non-empty batch after this long.")
    max_message_bytes: int = Field(1_048_576, ge=1_024, le=104_857_600, description="Larger messages are dead-lettered.")
    redact_fields: list[str] = Field(
        default_factory=lambda: ["question", "answer"],
        description=(
            "Trace fields the redaction patterns apply to: any of question, answer, retrieved_text, quotes, error, "
            "feedback_comment."
        ),
    )
    redact_patterns: dict[str, str] = Field(
        default_factory=lambda: {
            # starts only where a run of local-part characters starts: the same matches, in linear time on a
            # long run without a usable '@' (without the look-behind, every position of the run rescans the rest)
            "email": r"(?<![A-Za-z0-9._%+-])[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}",
            "phone": r"\+?\d[\d ()-]{7,}\d",
        },
        description="Name → regular expression; matches are replaced by '[REDACTED:<name>]' before storage.",
    )
    store_retry_max_seconds: float = Field(30.0, gt=0, le=3600, description="Cap of the exponential retry backoff.")
    shutdown_grace_seconds: float = Field(20.0, gt=0, le=600, description="Time to flush and commit on SIGTERM.")
    otlp_assembly_wait_seconds: float = Field(
        10.0, gt=0, le=600, description="How long spans of one OTLP trace are buffered waiting for the rest."
    )
    otlp_max_pending_traces: int = Field(10_000, ge=1, description="Bound on OTLP traces being assembled at once.")
    otlp_max_pending_bytes: int = Field(
        268_435_456, ge=1_048_576,
        description="Bound on the message bytes of the OTLP traces being assembled (each message's bytes shared "
        "among the traces in it); past it the oldest trace is emitted or dropped, as for the trace bound.",
    )

    @field_validator("redact_patterns")
    @classmethod
    def _patterns_compile(cls, v: dict[str, str]) -> dict[str, str]:
        import re

        for name, pattern in v.items():
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"pattern {name!r} is not a valid regular expression: {exc}") from exc
        return v


class ServerSettings(_Section):
    host: str = Field("127.0.0.1", description="Address the HTTP server (/metrics, /healthz, /readyz, review UI) binds.")
    port: int = Field(9108, ge=0, le=65535, description="HTTP port (0 picks a free one).")
    forwarded_allow_ips: str = Field(
        "127.0.0.1", min_length=1,
        description="Reverse proxies whose X-Forwarded-For names the client (comma-separated addresses or networks, "
        "or '*'). Sign-in throttling counts per client address: behind an Ingress, list the ingress controller's "
        "pod network, or every client shares the proxy's address.",
    )

    @field_validator("forwarded_allow_ips")
    @classmethod
    def _forwarded_hosts(cls, v: str) -> str:
        import ipaddress

        hosts = [h.strip() for h in v.split(",")]
        if "*" in hosts and len(hosts) > 1:
            raise ValueError("'*' (trust every proxy) stands alone, not in a list")
        for host in hosts:
            if host != "*":
                try:
                    ipaddress.ip_network(host)  # strict, as uvicorn reads it: 10.0.0.0/8, not 10.0.0.1/8
                except ValueError:
                    raise ValueError(f"{host!r} is not an IP address or network (e.g. 10.0.0.0/8), nor '*'") from None
        return v


class ReviewUser(_Section):
    username: str = Field(pattern=r"^[A-Za-z0-9_.@-]{1,64}$", description="Reviewer name, recorded on every label.")
    password_hash: SecretStr | None = Field(
        None, description="scrypt hash from `ragmon review hash-password` (never the password itself). Masked."
    )
    token_sha256: SecretStr | None = Field(
        None, description="SHA-256 (hex) of this reviewer's JSON API bearer token, from `ragmon review new-token`. Masked."
    )


class ReviewSettings(_Section):
    users: list[ReviewUser] = Field(
        default_factory=list, description="Who may sign in. Empty: the review UI refuses to start (no anonymous access)."
    )
    users_file: Path | None = Field(None, description="YAML list of users (same fields), e.g. a mounted Secret; added to users.")
    session_secret: SecretStr | None = Field(
        None, description="Key that signs session cookies (≥ 32 chars). Unset: a random key per process. Masked."
    )
    session_secret_file: Path | None = Field(None, description="Read the session key from this file instead.")
    session_max_age_seconds: int = Field(28_800, ge=60, le=2_592_000, description="A session expires this long after sign-in.")
    cookie_secure: bool = Field(False, description="Mark cookies Secure (set true behind HTTPS).")
    login_max_failures: int = Field(5, ge=1, le=1000, description="Failed sign-ins per user and address before a lock-out.")
    login_lockout_seconds: int = Field(300, ge=1, le=86_400, description="Window of the sign-in failure count.")
    sample_size: int = Field(50, ge=1, le=100_000, description="Traces in each week's random sample.")
    stratify: bool = Field(False, description="Guarantee min_per_stratum traces per category in the sample.")
    min_per_stratum: int = Field(0, ge=0, le=10_000, description="Minimum per category when stratify is on.")
    refresh_interval_seconds: float = Field(60.0, gt=0, le=3600, description="How often the review gauges are recomputed.")


class JudgeSettings(_Section):
    kind: Literal["heuristic", "openai"] = Field(
        "heuristic",
        description="'heuristic': deterministic lexical judge, no model (the embedded default). 'openai': any "
        "OpenAI-compatible /v1/chat/completions endpoint.",
    )
    base_url: str = Field(
        "https://api.openai.com/v1", pattern=r"^https?://", description="Endpoint base URL, up to and including /v1."
    )
    model: str = Field("gpt-4o-mini", min_length=1, description="Judge model name as the endpoint knows it.")
    model_version: str = Field(
        "", description="Pinned model snapshot (e.g. '2024-07-18'); part of the fingerprint, so a change is visible."
    )
    api_key: SecretStr | None = Field(None, description="API key, sent as a Bearer token. Masked.")
    api_key_file: Path | None = Field(None, description="Read the API key from this file instead (a mounted Secret).")
    temperature: float = Field(0.0, ge=0, le=2, description="Sampling temperature; 0 for repeatable verdicts.")
    timeout_seconds: float = Field(30.0, gt=0, le=600, description="Timeout of one HTTP request.")
    deadline_seconds: float = Field(
        120.0, gt=0, le=3600, description="Give up retrying one trace after this long (then it is recorded as failed)."
    )
    max_attempts: int = Field(6, ge=1, le=50, description="HTTP attempts per trace (retries on 429, 5xx, timeouts).")
    backoff_initial_seconds: float = Field(0.5, gt=0, le=60, description="First retry delay; doubles per attempt, with jitter.")
    backoff_max_seconds: float = Field(20.0, gt=0, le=600, description="Cap of one retry delay (Retry-After is honoured up to it).")
    max_output_tokens: int = Field(2_000, ge=64, le=100_000, description="max_tokens of the judge's answer.")
    max_chunk_chars: int = Field(
        4_000, ge=100, le=200_000, description="Chunk text longer than this is cut in the prompt (part of the fingerprint)."
    )
    input_usd_per_million_tokens: float = Field(0.0, ge=0, description="Price of prompt tokens, for cost accounting.")
    output_usd_per_million_tokens: float = Field(0.0, ge=0, description="Price of completion tokens, for cost accounting.")
    cache_max_entries: int = Field(
        10_000, ge=0, le=10_000_000, description="Verdicts kept in memory per (trace content hash, fingerprint); 0 disables."
    )


class RateOverride(_Section):
    retriever: str | None = Field(None, description="Retriever name this rate applies to (any when unset).")
    category: str | None = Field(None, description="Stratum (category) this rate applies to (any when unset).")
    rate: float = Field(ge=0, le=1, description="Share of traces to score, 0..1.")


class SamplingSettings(_Section):
    salt: str = Field(
        "ragmon-score-v1", min_length=1, max_length=256,
        description="Mixed into the hash of query_id; change it to draw a different (still deterministic) sample.",
    )
    rate: float = Field(0.05, ge=0, le=1, description="Share of traces scored live, 0..1 (decided per query_id).")
    overrides: list[RateOverride] = Field(
        default_factory=list,
        description="Per retriever and/or category rates; the most specific match wins (both > retriever > category).",
    )
    max_per_hour: int | None = Field(
        None, ge=0, description="Cap on sampled queries per clock hour, per score replica (None: no cap)."
    )
    daily_budget_usd: float | None = Field(
        None, ge=0, description="Judge spend per UTC day, per score replica; past it decisions are over_budget."
    )


class ScoreSettings(_Section):
    group_id: str = Field("ragmon-score", min_length=1, description="Kafka consumer group of the score role.")
    topic: str | None = Field(
        None, pattern=r"^[A-Za-z0-9._-]{1,249}$", description="Topic to score from (default: kafka.topic, the traces)."
    )
    max_batch_traces: int = Field(500, ge=1, le=100_000, description="Traces per poll/insert round.")
    poll_timeout_seconds: float = Field(1.0, gt=0, le=60, description="How long one Kafka poll waits for records.")
    flush_interval_seconds: float = Field(
        1.0, gt=0, le=300, description="Score and store buffered traces after this long even below max_batch_traces."
    )
    judge_attempts: int = Field(
        2, ge=1, le=10, description="Judge calls per trace before it is recorded as failed (each with its own retries)."
    )


class DriftWindowSettings(_Section):
    current_seconds: int = Field(3600, ge=60, le=30 * 86400, description="Length of the current window, ending now.")
    reference: Literal["trailing", "pinned"] = Field(
        "trailing",
        description="'trailing': the reference is the previous reference_days before the current window; "
        "'pinned': a fixed baseline given by reference_start/reference_end or reference_corpus_snapshot.",
    )
    reference_days: int = Field(7, ge=1, le=90, description="Trailing reference length in days.")
    same_hours: bool = Field(
        True, description="Trailing reference uses only the same hours of day as the current window (daily seasonality)."
    )
    reference_start: datetime | None = Field(None, description="Pinned baseline start (UTC, ISO 8601).")
    reference_end: datetime | None = Field(None, description="Pinned baseline end (UTC, ISO 8601), exclusive.")
    reference_corpus_snapshot: str | None = Field(
        None, min_length=1, description="Pinned baseline: the traces served from this corpus snapshot."
    )


class DriftFeatureOverride(_Section):
    enabled: bool = Field(True, description="Run this feature at all.")
    tests: list[str] | None = Field(None, description="Test names (ks, psi, two_proportion, chi_square).")
    threshold: float | None = Field(None, gt=0, lt=1, description="Significance level on the BH-adjusted p-value.")
    effect_threshold: float | None = Field(None, ge=0, description="Minimum effect size to declare drift.")
    min_samples: int | None = Field(None, ge=1, description="Minimum observations in each window.")
    windows: DriftWindowSettings | None = Field(None, description="Windows for this feature (default: drift.windows).")


class DriftSettings(_Section):
    interval_seconds: float = Field(3600.0, ge=5, le=7 * 86400, description="Time between scheduled drift checks.")
    windows: DriftWindowSettings = Field(default_factory=DriftWindowSettings, description="Reference and current windows.")
    alpha: float = Field(
        0.05, gt=0, lt=1, description="False-discovery rate of one check (Benjamini–Hochberg over all its tests)."
    )
    min_samples: int | None = Field(
        None, ge=1, description="Minimum observations per window for every test (default: each test's own, 100–200)."
    )
    features: list[str] | None = Field(None, description="Features to check (default: all; see `ragmon drift features`).")
    overrides: dict[str, DriftFeatureOverride] = Field(default_factory=dict, description="Per-feature settings.")
    max_groups: int = Field(
        200, ge=1, le=10_000, description="Upper bound on (retriever, variant, stratum) groups per check (label cardinality)."
    )


class ShadowComparisonSettings(_Section):
    baseline: str = Field(
        pattern=r"^[^@\s]{1,256}(@[^@\s]{0,256})?$", description="Production retriever as NAME or NAME@VERSION."
    )
    candidate: str = Field(
        pattern=r"^[^@\s]{1,256}(@[^@\s]{0,256})?$", description="Candidate retriever as NAME or NAME@VERSION."
    )
    baseline_variant: Literal["production", "shadow", "canary"] = Field("production", description="Baseline variant.")
    candidate_variant: Literal["production", "shadow", "canary"] = Field("shadow", description="Candidate variant.")
    window_seconds: float = Field(3600.0, ge=60, le=90 * 86400, description="Each run compares the last this-many seconds.")
    k: int | None = Field(None, ge=1, le=1000, description="Top k compared (default: the smaller usual list length).")
    latency_stage: str = Field("retrieve", min_length=1, max_length=256, description="latency_ms key compared, or 'total'.")

    @model_validator(mode="after")
    def _sides_differ(self) -> ShadowComparisonSettings:
        if (self.baseline, self.baseline_variant) == (self.candidate, self.candidate_variant):
            raise ValueError(f"baseline and candidate both select {self.baseline} ({self.baseline_variant}); "
                             "give the candidate's name, version or variant")
        return self


class ShadowSettings(_Section):
    interval_seconds: float = Field(300.0, ge=5, le=86400, description="Time between runs of the configured comparisons.")
    comparisons: list[ShadowComparisonSettings] = Field(
        default_factory=list, description="Running shadow comparisons exported as ragmon_shadow_* gauges."
    )


class RolesSettings(_Section):
    ingest: bool = Field(True, description="Run the Kafka → ClickHouse ingest loop.")
    score: bool = Field(True, description="Score sampled traces with the judge.")
    drift: bool = Field(True, description="Run drift checks on a schedule.")
    review: bool = Field(True, description="Serve the review UI and select the weekly sample.")
    shadow: bool = Field(
        True, description="Run the configured shadow comparisons (shadow.comparisons) on a schedule. With several "
        "processes, switch it on in one of them only (the Helm chart runs it in the drift Deployment).",
    )


class Settings(BaseSettings):
    """Every ragmon setting. Sections are added by the subsystems that own them."""

    model_config = SettingsConfigDict(
        env_prefix="RAGMON_",
        env_nested_delimiter="__",
        extra="forbid",
        validate_default=True,
    )

    store: StoreSettings = Field(default_factory=StoreSettings, description="ClickHouse store.")
    kafka: KafkaSettings = Field(default_factory=KafkaSettings, description="Kafka source.")
    ingest: IngestSettings = Field(default_factory=IngestSettings, description="Ingest batching and redaction.")
    server: ServerSettings = Field(default_factory=ServerSettings, description="HTTP server.")
    roles: RolesSettings = Field(default_factory=RolesSettings, description="Which daemon roles `ragmon run` starts.")
    review: ReviewSettings = Field(default_factory=ReviewSettings, description="Weekly human review UI and sample.")
    judge: JudgeSettings = Field(default_factory=JudgeSettings, description="The pinned judge (heuristic or OpenAI-compatible).")
    sampling: SamplingSettings = Field(default_factory=SamplingSettings, description="Live-scoring sampler.")
    score: ScoreSettings = Field(default_factory=ScoreSettings, description="The live scoring role.")
    drift: DriftSettings = Field(default_factory=DriftSettings, description="Drift checks on retrieval and quality features.")
    shadow: ShadowSettings = Field(default_factory=ShadowSettings, description="Configured running shadow comparisons.")

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # environment beats the YAML file (passed as init kwargs) so a Deployment can override one field
        return env_settings, init_settings


def load_settings(path: str | Path | None = None) -> Settings:
    """Load and validate settings from ``path`` (YAML, optional) and ``RAGMON_*`` environment variables.

    Raises ``ConfigError`` listing every problem, one per line.
    """
    data: dict[str, Any] = _read_yaml(Path(path)) if path is not None else {}
    _check_environment_sections()
    try:
        settings = Settings(**data)
    except ValidationError as exc:
        lines = [_problem_line(err, path) for err in exc.errors()]
        if len(lines) > MAX_PROBLEM_LINES:
            lines[MAX_PROBLEM_LINES:] = [f"… and {len(lines) - MAX_PROBLEM_LINES} more problems"]
        raise ConfigError(lines) from None
    except SettingsError as exc:  # a RAGMON_* variable for a list/mapping setting that is not JSON
        names = sorted(n for n in os.environ if n.upper().startswith("RAGMON_") and "__" in n)
        raise ConfigError([f"environment: {exc}; list and mapping settings take JSON, e.g. "
                           f"RAGMON_INGEST__REDACT_FIELDS='[\"question\"]' (set: {', '.join(names) or 'none'})"]) from None
    return _resolve_store(_resolve_secret_files(settings))


def _check_environment_sections() -> None:
    """``RAGMON_<SECTION>__<FIELD>`` naming no section is a typo (``RAGMON_SOTRE__DSN``) that would otherwise be
    ignored, leaving the default in force. (Unknown fields of a known section are refused by the models.)"""
    sections = set(Settings.model_fields)
    unknown = sorted(name for name in os.environ if name.upper().startswith("RAGMON_") and "__" in name
                     and name[len("RAGMON_"):].split("__", 1)[0].lower() not in sections)
    if unknown:
        raise ConfigError([f"environment: {name} names no settings section (check the spelling; sections are "
                           f"{', '.join(sorted(sections))})" for name in unknown])


def _resolve_store(settings: Settings) -> Settings:
    """Check the DSN's form now (exit 2, not a failed connection later), and take the database a server DSN names."""
    from ragmon.errors import StoreError
    from ragmon.store.client import parse_dsn

    try:
        dsn = parse_dsn(secret_value(settings.store.dsn) or "")
    except StoreError as exc:
        message = str(exc)
        raise ConfigError([message if message.startswith("store.dsn") else f"store.dsn: {message}"]) from None
    if dsn.database is None or dsn.database == settings.store.database:
        return settings
    if "database" in settings.store.model_fields_set:
        raise ConfigError([f"store.database is {settings.store.database!r} but store.dsn names database "
                           f"{dsn.database!r}; set one of them (the DSN's path may be left out)"])
    try:
        store = type(settings.store).model_validate(settings.store.model_dump() | {"database": dsn.database})
    except ValidationError:
        raise ConfigError([f"store.dsn: the database it names, {dsn.database!r}, is not a valid database name "
                           "(letters, digits and _, not starting with a digit)"]) from None
    return settings.model_copy(update={"store": store})


def override(settings: Settings, section: str, **values: Any) -> Settings:
    """``settings`` with fields of one section replaced, as command-line options do; ``None`` leaves a field alone.

    The section is validated again; raises ``ConfigError`` with one line per problem (``server.port: ...``).
    """
    given = {k: v for k, v in values.items() if v is not None}
    if not given:
        return settings
    current = getattr(settings, section)
    try:
        replaced = type(current).model_validate(current.model_dump() | given)
    except ValidationError as exc:
        raise ConfigError([f"{section}.{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()]) from None
    return settings.model_copy(update={section: replaced})


def secret_value(secret: SecretStr | None) -> str | None:
    return None if secret is None else secret.get_secret_value()


def masked_dump(settings: Settings) -> dict[str, Any]:
    """The effective settings as plain data, every secret (and any password inside a DSN) masked."""
    data = settings.model_dump(mode="json")
    data["store"]["dsn"] = mask_dsn(secret_value(settings.store.dsn) or "")
    return data


def mask_dsn(dsn: str) -> str:
    """Hide the password part of a DSN: ``http://u:pw@h`` → ``http://u:****@h``.

    Done on the text, not on a parsed URL: a password with an unescaped ``?``, ``#`` or ``/`` makes a URL parser
    see the password as the host, query or path. Everything between ``user:`` and the last ``@`` is masked (at
    worst a little more than the password, never less).
    """
    scheme, sep, rest = dsn.partition("://")
    if not sep or "@" not in rest:
        return dsn
    userinfo, _, host = rest.rpartition("@")
    user, colon, _ = userinfo.partition(":")
    return f"{scheme}://{user}{':****' if colon else ''}@{host}"


class _UniqueKeyLoader(yaml.SafeLoader):
    """PyYAML's safe loader, refusing a key given twice in one mapping (it would silently keep the last one)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)  # type: ignore[no-untyped-call]
            if isinstance(key, str | int | float | bool) or key is None:
                if key in seen:
                    raise yaml.constructor.ConstructorError(
                        None, None, f"key {key!r} appears twice in this mapping (the second would win)",
                        key_node.start_mark)
                seen.add(key)
        return super().construct_mapping(node, deep=deep)


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError([f"{path}: cannot read the config file ({exc.strerror or exc})"]) from None
    except UnicodeDecodeError as exc:
        raise ConfigError([f"{path}: not UTF-8 text (byte {exc.start}); save the config file as UTF-8 YAML"]) from None
    try:
        data = yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise ConfigError([f"{path}: not valid YAML{where}: {getattr(exc, 'problem', exc)}"]) from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError([f"{path}: the top level must be a mapping of sections (store:, kafka:, …)"])
    odd = [f"{path}: top-level key {k!r} is not a section name (store:, kafka:, …)" for k in data if not isinstance(k, str)]
    if odd:  # Settings(**data) would raise TypeError on them
        raise ConfigError(odd)
    return data


def _problem_line(err: Any, path: str | Path | None) -> str:
    loc = ".".join(str(p) for p in err.get("loc", ())) or "(top level)"
    # RAGMON_<SECTION>__<FIELD>: deeper locations (list items, mapping keys) are inside that one variable
    env_name = "RAGMON_" + "__".join(str(p).upper() for p in err.get("loc", ())[:2])
    msg = err.get("msg", "invalid")
    if err.get("type") == "extra_forbidden":
        msg = "unknown setting (check the spelling; `ragmon config show` lists every setting)"
    where = f" (file {path} or env {env_name})" if path else f" (env {env_name})"
    given = err.get("input")
    # never echo a value that may be a secret, or any value under an unknown (perhaps misspelled secret) name
    secret = any(word in loc.lower() for word in _SECRET_WORDS) or err.get("type") == "extra_forbidden"
    shown = "" if isinstance(given, dict | list) or given is None or secret else f", got {_clip(repr(given))}"
    return f"{loc}: {msg}{given and shown or ''}{where}"


_SECRET_WORDS = ("password", "passwd", "dsn", "key", "secret", "token", "hash", "credential")


def _clip(text: str, limit: int = 80) -> str:
    """One problem stays one readable line even when the offending value is megabytes long."""
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text):,} characters)"


def _resolve_secret_files(settings: Settings) -> Settings:
    problems: list[str] = []
    updates: dict[str, dict[str, Any]] = {}
    for section_name, field, file_field in (("store", "dsn", "dsn_file"), ("kafka", "sasl_password", "sasl_password_file"),
                                             ("review", "session_secret", "session_secret_file"),
                                             ("judge", "api_key", "api_key_file")):
        section = getattr(settings, section_name)
        file_path = getattr(section, file_field)
        if file_path is None:
            continue
        try:
            value = Path(file_path).read_text(encoding="utf-8").strip()
        except OSError as exc:
            problems.append(f"{section_name}.{file_field}: cannot read {file_path} ({exc.strerror or exc})")
            continue
        except UnicodeDecodeError as exc:
            problems.append(f"{section_name}.{file_field}: {file_path} is not UTF-8 text (byte {exc.start}); the file "
                            f"holds the {field.replace('_', ' ')} itself, as text")
            continue
        updates.setdefault(section_name, {})[field] = SecretStr(value)
    if problems:
        raise ConfigError(problems)
    for section_name, fields in updates.items():
        settings = settings.model_copy(
            update={section_name: getattr(settings, section_name).model_copy(update=fields)}
        )
    return settings
