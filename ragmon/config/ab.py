"""The ``ab`` section: outcome events of an A/B cohort (their topic) and how ``ragmon ab compare`` judges it.

Owns the outcome topic names, the bounded wait of the trace/outcome join, the reformulation window and the
comparison's defaults. Ingesting outcomes is ``ragmon.outcomes.loop``; comparing is ``ragmon.ab``. Must not
open a connection.
"""

from __future__ import annotations

from pydantic import Field

from ragmon.config.section import Section


class AbSettings(Section):
    outcomes_topic: str = Field("rag.outcomes", min_length=1, max_length=249,
                                description="Kafka topic of outcome events (schemas/outcome.v1).")
    outcomes_group_id: str = Field("ragmon-outcomes", min_length=1, description="Consumer group of the outcome ingest.")
    outcomes_dead_letter_topic: str = Field("rag.outcomes.dlq", min_length=1,
                                            description="Topic for invalid outcome events, with the reason headers.")
    max_batch_events: int = Field(5000, ge=1, le=1_000_000, description="Outcome events per insert.")
    flush_interval_seconds: float = Field(1.0, gt=0, le=300, description="Longest an event waits before its insert.")
    join_wait_seconds: float = Field(
        1800.0, ge=0, le=7 * 86400, description="Bounded wait of the trace/outcome join: an outcome counts for a "
        "query when it happened within this long after the trace, and a comparison leaves out traces younger than "
        "this (their outcomes may still arrive).",
    )
    reformulation_seconds: float = Field(
        120.0, ge=0, le=86400, description="A query counts as reformulated too when the same session (session.id) "
        "asks again within this many seconds (0: only reformulated events count).",
    )
    min_per_arm: int = Field(200, ge=10, le=10_000_000,
                             description="Hold a stratum with fewer traces than this in either arm (cohort too small).")
    max_rate_harm: float = Field(0.02, ge=0, le=1, description="Tolerated worsening of an outcome rate (0.02 = two "
                                 "percentage points) before a stratum is rejected.")
    max_latency_increase_ms: float = Field(50.0, ge=0, description="Tolerated increase of mean total latency (ms).")
    max_quality_drop: float = Field(0.02, ge=0, le=1, description="Tolerated drop of a judged quality mean (0..1).")
    max_feedback_drop: float = Field(
        0.1, ge=0, le=2, description="Tolerated drop of the mean feedback value, on its -1..1 scale (0.1 = five "
        "points of thumbs-up share when every value is 1 or -1). Two identical arms need about 1,500 feedback "
        "events each for 'ok' at 0.1 (docs/ab.md lists what each measure needs).",
    )
