"""The ``ingest`` section: batching, redaction and OTLP assembly of the ingest loop (Kafka or OTLP/HTTP → ClickHouse).

Owns the model and its check that every redaction pattern compiles. ``shutdown_grace_seconds`` here is the
deprecated name of ``process.shutdown_grace_seconds``: the root ``Settings`` keeps the two equal. Must not read
Kafka or the store.
"""

from __future__ import annotations

import re

from pydantic import Field, field_validator

from ragmon.config.section import Section


class IngestSettings(Section):
    max_batch_rows: int = Field(10_000, ge=1, le=1_000_000, description="Flush a batch at this many traces.")
    max_batch_bytes: int = Field(33_554_432, ge=1_024, description="Flush a batch at this many message bytes.")
    flush_interval_seconds: float = Field(1.0, gt=0, le=300, description="Flush a non-empty batch after this long.")
    freshness_target_seconds: float | None = Field(
        None, gt=0, le=300,
        description="When set, the flush interval adapts for bigger inserts: a batch waits as long as this target "
        "allows once the slowest of the last 8 inserts and 0.25 s for polling are taken off, never less than "
        "flush_interval_seconds nor more than the target. Unset: every batch waits flush_interval_seconds.",
    )
    max_message_bytes: int = Field(1_048_576, ge=1_024, le=104_857_600,
                                   description="Larger messages are dead-lettered.")
    redact_fields: list[str] = Field(
        default_factory=lambda: ["question", "answer"],
        description=(
            "Trace fields the redaction patterns apply to, before storage and before a judge sees the trace: any "
            "of question, answer, retrieved_text (chunk text), quotes, error, feedback_comment."
        ),
    )
    redact_attributes: list[str] = Field(
        default_factory=list,
        description="Keys of a trace's attributes whose values the redaction patterns apply to too (e.g. user_note).",
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
    shared_tenants: list[str] = Field(
        default_factory=list,
        description="Tenants whose chunks every user may read (public documentation, a shared knowledge base). A "
        "retrieved chunk whose tenant is neither the asking user's tenant nor one of these is a permission leak, "
        "counted on every ingested trace (docs/leaks.md).",
    )
    store_retry_max_seconds: float = Field(30.0, gt=0, le=3600, description="Cap of the exponential retry backoff.")
    shutdown_grace_seconds: float = Field(
        20.0, gt=0, le=600,
        description="Deprecated: use process.shutdown_grace_seconds. Still read (with a warning) when that is not "
        "set; always equal to it after loading.",
    )
    otlp_max_query_seconds: float = Field(
        600.0, gt=0, le=86_400,
        description="The longest query stored whole: how long the spans of an OTLP trace wait for its root span "
        "(the query's own span, which ends last, after the LLM's answer), counted from the trace's first span. A "
        "trace whose root has not arrived by then is dead-lettered (reason otlp_no_root) with the spans that did. "
        "Waiting spans keep their messages uncommitted (Kafka offsets, OTLP/HTTP spool), so a restart re-reads up "
        "to this long of input (docs/otlp.md).",
    )
    otlp_assembly_wait_seconds: float = Field(
        10.0, gt=0, le=600,
        description="Once an OTLP trace's root span has arrived, how long the trace waits for the parent spans it "
        "still lacks (a span names a parent that has not arrived: another service's, one lost on the way) before "
        "it is stored marked incomplete. Spans without their root wait otlp_max_query_seconds instead.",
    )
    otlp_settle_seconds: float = Field(
        2.0, ge=0, le=600,
        description="How long an OTLP trace whose root has arrived waits for more spans (another service's, a "
        "streamed answer's) before it is stored, unless it already has a retriever, an LLM call and the final "
        "answer. Capped by otlp_assembly_wait_seconds.",
    )
    otlp_repair_window_seconds: float = Field(
        60.0, ge=0, le=3600,
        description="How long the spans of an emitted OTLP trace are kept: spans arriving later in this window "
        "store a new version of it (replacing the stored one); after it they are dropped and counted. 0: no repairs.",
    )
    otlp_max_repair_bytes: int = Field(
        67_108_864, ge=0,
        description="Bound on the message bytes of the emitted OTLP traces kept for repairs (the oldest goes first).",
    )
    otlp_max_pending_traces: int = Field(
        10_000, ge=1,
        description="Bound on OTLP traces being assembled at once; past it the oldest leaves early (stored marked "
        "incomplete, or dead-lettered as otlp_no_root without its root).",
    )
    otlp_max_pending_bytes: int = Field(
        268_435_456, ge=1_048_576,
        description="Bound on the message bytes of the OTLP traces being assembled (each message's bytes shared "
        "among the traces in it); past it the oldest trace leaves early, as for the trace bound: stored marked "
        "incomplete when its root has arrived, else dead-lettered (otlp_no_root).",
    )

    @field_validator("redact_patterns")
    @classmethod
    def _patterns_compile(cls, v: dict[str, str]) -> dict[str, str]:
        for name, pattern in v.items():
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"pattern {name!r} is not a valid regular expression: {exc}") from exc
        return v
