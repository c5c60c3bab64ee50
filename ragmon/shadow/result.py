"""The frozen result types of a shadow comparison, each carrying the parameters that produced it.

Types only: no I/O, no computation beyond derived properties.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Literal

from ragmon.shadow.pairs import RetrieverRef

if TYPE_CHECKING:  # annotations only: importing the statistics would pull SciPy into every CLI start-up
    from ragmon.shadow.stats import PairedDifferenceResult, ShiftResult

Decision = Literal["promote", "hold", "reject"]
QUANTILES = (0.5, 0.95, 0.99)


@dataclass(frozen=True, slots=True)
class Verdict:
    decision: Decision
    reasons: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Agreement:
    """Means over pairs; ``n_top1``/``n_tau`` count the pairs where those are defined."""

    k: int
    rbo_p: float
    mean_overlap: float
    mean_rbo: float
    top1_rate: float
    n_top1: int
    mean_tau: float
    n_tau: int


@dataclass(frozen=True, slots=True)
class Side:
    """Operational figures of one side over the paired queries."""

    latency_ms: tuple[float, float, float] | None  # p50, p95, p99 of the compared latency stage
    latency_missing: int
    error_rate: float
    empty_rate: float
    context_tokens: float
    cost_mean_usd: float
    cost_total_usd: float
    results_mean: float
    short_lists: int  # error-free lists shorter than k


@dataclass(frozen=True, slots=True)
class Operational:
    latency_stage: str
    baseline: Side
    candidate: Side

    def latency_delta_ms(self) -> tuple[float, float, float] | None:
        b, c = self.baseline.latency_ms, self.candidate.latency_ms
        if b is None or c is None:
            return None
        return (c[0] - b[0], c[1] - b[1], c[2] - b[2])


@dataclass(frozen=True, slots=True)
class QualityDelta:
    """One metric's paired difference in one stratum. ``source`` is 'judge' (scores table, one fingerprint)
    or 'canary' (computed from the golden set on queries that match a golden case)."""

    metric: str
    source: Literal["judge", "canary"]
    judge_fingerprint: str
    result: PairedDifferenceResult


@dataclass(frozen=True, slots=True)
class StratumComparison:
    stratum: str
    pairs: int
    baseline_only: int
    candidate_only: int
    duplicates: int
    agreement: Agreement
    shift: ShiftResult | None
    operational: Operational
    quality: tuple[QualityDelta, ...]
    verdict: Verdict


@dataclass(frozen=True, slots=True)
class Example:
    """One paired query shown in the report, with both top-k lists side by side (untrusted text)."""

    query_id: str
    stratum: str
    question: str
    metric: str
    baseline_value: float
    candidate_value: float
    baseline_top_k: tuple[str, ...]
    candidate_top_k: tuple[str, ...]
    relevant: tuple[str, ...] = ()

    @property
    def difference(self) -> float:
        return self.candidate_value - self.baseline_value


@dataclass(frozen=True, slots=True)
class Examples:
    """'quality': largest gains and losses by ``metric``; 'disagreement': no quality data, so the pairs with
    the lowest rank-biased overlap are shown (a disagreement is not a loss)."""

    kind: Literal["quality", "disagreement", "none"]
    metric: str
    gains: tuple[Example, ...] = ()
    losses: tuple[Example, ...] = ()


@dataclass(frozen=True)
class ComparisonResult:
    baseline: RetrieverRef
    candidate: RetrieverRef
    since: datetime
    until: datetime
    k: int
    thresholds: object  # verdict.Thresholds (kept untyped here to avoid an import cycle)
    confidence: float
    n_resamples: int
    seed: int
    baseline_traces: int
    candidate_traces: int
    strata: tuple[StratumComparison, ...]
    overall: StratumComparison
    examples: Examples
    verdict: Verdict
    exit_code: int
    notices: tuple[str, ...] = field(default_factory=tuple)

    @property
    def pairs(self) -> int:
        return self.overall.pairs


def finite_or_none(value: float | None) -> float | None:
    return None if value is None or (isinstance(value, float) and not math.isfinite(value)) else value
