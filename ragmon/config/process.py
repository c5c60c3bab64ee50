"""What a daemon process runs and shares: which roles ``ragmon run`` starts (``roles``), and the shutdown grace
and liveness limits every daemon process applies (``process``).

Owns these two models. The liveness limits are the ages past which ``/healthz`` reports a loop stalled; the
heartbeats themselves belong to the roles. Must not start anything.
"""

from __future__ import annotations

from pydantic import Field

from ragmon.config.section import Section

#: ``process.ingest_liveness_seconds`` when unset: a poll may wait on one store query, so the limit follows the
#: query timeout (twice it), but never below a minute
INGEST_LIVENESS_FLOOR_SECONDS = 60.0


class ProcessSettings(Section):
    shutdown_grace_seconds: float = Field(
        20.0, gt=0, le=600,
        description="Time a daemon process has on SIGTERM to stop polling, flush, commit and close (was "
        "ingest.shutdown_grace_seconds). Keep the pod's terminationGracePeriodSeconds above it.",
    )
    score_liveness_seconds: float = Field(
        120.0, gt=0, le=86_400,
        description="/healthz reports the score loop stalled when its last poll is older than this.",
    )
    ingest_liveness_seconds: float | None = Field(
        None, gt=0, le=86_400,
        description="/healthz reports the ingest loop stalled when its last poll is older than this. Unset: "
        "max(60, 2 × store.query_timeout_seconds), since one poll may wait on a store query.",
    )

    def ingest_liveness_limit(self, query_timeout_seconds: float) -> float:
        """``ingest_liveness_seconds``, or when unset the default derived from the store's query timeout."""
        if self.ingest_liveness_seconds is not None:
            return self.ingest_liveness_seconds
        return max(INGEST_LIVENESS_FLOOR_SECONDS, 2 * query_timeout_seconds)


class RolesSettings(Section):
    ingest: bool = Field(True, description="Run the Kafka → ClickHouse ingest loop.")
    otlp: bool = Field(
        True, description="Serve OTLP/HTTP POST /v1/traces (otlp.host:otlp.port) into the store, through the same "
        "assembly, validation and redaction as Kafka input.",
    )
    outcomes: bool = Field(
        False, description="Ingest A/B outcome events (schemas/outcome.v1) from ab.outcomes_topic, with the trace "
        "loop's guarantees. Off by default: switch it on when an application sends outcomes for `ragmon ab compare`.",
    )
    score: bool = Field(True, description="Score sampled traces with the judge.")
    drift: bool = Field(True, description="Run drift checks on a schedule.")
    coverage: bool | None = Field(
        None, description="Compare the golden set (coverage.golden_path; no check without it) with live traffic's "
        "question types every coverage.interval_seconds. Unset: as roles.drift (the drift role ran it before it was "
        "a role of its own).",
    )
    judge_agreement: bool | None = Field(
        None, description="Track judge-vs-human agreement week by week (drift.judge_agreement; off there, off here) "
        "for RagmonJudgeAgreementLow. Unset: as roles.drift (the drift role ran it before it was a role of its own). "
        "With several processes, run it in one of them only.",
    )
    review: bool = Field(True, description="Serve the review UI and select the weekly sample.")
    shadow: bool = Field(
        True, description="Run the configured shadow comparisons (shadow.comparisons) on a schedule. With several "
        "processes, switch it on in one of them only (the Helm chart runs it in the drift Deployment).",
    )

    def switched_on(self, role: str) -> bool:
        """``roles.<role>``; an unset switch (coverage, judge agreement) follows ``roles.drift``."""
        value = getattr(self, role)
        return self.drift if value is None else bool(value)
