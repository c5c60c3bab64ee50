"""Live scoring: the pinned judge (``judge``), the sampler that picks traces (``sampling``) and the score loop
(``score``).

Owns these models only; the fingerprint built from the judge settings lives in ``ragmon.judge``. Must not call
the judge endpoint.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr

from ragmon.config.section import Section


class JudgeSettings(Section):
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
    max_in_flight: int = Field(
        64, ge=1, le=512,
        description="Most judge calls at once (threads, connections) in the score role, score --from-store, "
        "calibrate --rejudge and gate --answerer. With adaptive_concurrency the judge finds how many of them the "
        "endpoint serves without queueing (from 8, growing while answers come back as fast, shrinking when they "
        "slow down); without it, exactly this many. The heuristic judge runs one at a time whatever this says "
        "(it is CPU-bound).",
    )
    adaptive_concurrency: bool = Field(
        True, description="Learn the calls at once from the endpoint's latency, up to max_in_flight (see "
        "docs/judges.md); off: always max_in_flight.",
    )
    requests_per_minute: float | None = Field(
        None, gt=0,
        description="Client-side request limit (token bucket, one second of burst) per process; set it to the "
        "provider's limit divided by the processes sharing the key. Unset: none, but 429 answers still slow the "
        "judge down (adaptive limit).",
    )
    tokens_per_minute: float | None = Field(
        None, gt=0,
        description="Client-side token limit per process (prompt estimated at 3 characters a token plus "
        "max_output_tokens, settled with the tokens the endpoint reports). Unset: none.",
    )
    heuristic_chunk_cache_entries: int = Field(
        4_096, ge=0, le=1_000_000,
        description="Chunk texts whose sentences and words the heuristic judge keeps (least recently used out; "
        "about 3 KB each at 1,000 characters); 0 disables.",
    )


class RateOverride(Section):
    retriever: str | None = Field(None, description="Retriever name this rate applies to (any when unset).")
    category: str | None = Field(None, description="Stratum (category) this rate applies to (any when unset).")
    rate: float = Field(ge=0, le=1, description="Share of traces to score, 0..1.")


class SamplingSettings(Section):
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


class ScoreSettings(Section):
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
