"""Cost metrics: tokens, cost and latency percentiles per stratum, reported beside quality, never blended with it.

Percentiles use linear interpolation between closest ranks (NumPy's default, "type 7"), so p50 of [1, 2] is 1.5
and the figures match ``numpy.percentile``. Pure functions: no I/O, no clock.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

__all__ = ["CostRecord", "CostReport", "CostSummary", "cost_by_stratum", "percentile", "summarise_cost"]


def percentile(values: Sequence[float], q: float) -> float | None:
    """The ``q``-th percentile (0..100) of ``values`` by linear interpolation; None for no values.

    Raises ``ValueError`` for q outside [0, 100] or a non-finite value.

    Does NOT catch: small samples — p95 of 10 latencies is nearly the maximum and swings with one slow call;
    report n beside it.
    """
    if not 0 <= q <= 100 or not math.isfinite(q):
        raise ValueError(f"percentile q must be in [0, 100], got {q!r}")
    if not values:
        return None
    data = sorted(values)
    if not all(math.isfinite(v) for v in data):
        raise ValueError("percentile needs finite values")
    position = (len(data) - 1) * q / 100
    low = math.floor(position)
    high = min(low + 1, len(data) - 1)
    return data[low] + (data[high] - data[low]) * (position - low)


@dataclass(frozen=True, slots=True)
class CostRecord:
    """One query's cost: its stratum, generation tokens, cost in US dollars and end-to-end latency in ms."""

    stratum: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    latency_ms: float | None = None


@dataclass(frozen=True, slots=True)
class CostSummary:
    """Totals, means and latency percentiles of one group of queries (latency over queries that report one)."""

    n: int
    tokens_total: int
    tokens_mean: float | None
    cost_usd_total: float
    cost_usd_mean: float | None
    latency_n: int
    latency_p50_ms: float | None
    latency_p95_ms: float | None


@dataclass(frozen=True, slots=True)
class CostReport:
    """Per-stratum summaries plus the summary over all queries (kept apart, so a stratum named "ALL" is safe)."""

    strata: dict[str, CostSummary]
    overall: CostSummary


def summarise_cost(records: Sequence[CostRecord]) -> CostSummary:
    """Totals, means and p50/p95 latency of ``records``.

    Does NOT catch: cost not reported by the producer (a missing ``cost_usd`` is 0), nor the latency of stages
    outside the trace (queueing in front of the service).
    """
    for r in records:
        if not math.isfinite(r.cost_usd) or r.cost_usd < 0:
            raise ValueError(f"cost_usd must be a finite number >= 0, got {r.cost_usd!r}")
        if r.prompt_tokens < 0 or r.completion_tokens < 0:
            raise ValueError("token counts must be >= 0")
    n = len(records)
    tokens = sum(r.prompt_tokens + r.completion_tokens for r in records)
    cost = math.fsum(r.cost_usd for r in records)
    latencies = [r.latency_ms for r in records if r.latency_ms is not None]
    return CostSummary(
        n=n,
        tokens_total=tokens,
        tokens_mean=tokens / n if n else None,
        cost_usd_total=cost,
        cost_usd_mean=cost / n if n else None,
        latency_n=len(latencies),
        latency_p50_ms=percentile(latencies, 50),
        latency_p95_ms=percentile(latencies, 95),
    )


def cost_by_stratum(records: Iterable[CostRecord]) -> CostReport:
    """:func:`summarise_cost` per stratum and over everything.

    Does NOT catch: the trade-off itself — a change that improves quality and triples tokens shows up here as a
    number; deciding whether it is worth it is a person's job.
    """
    groups: dict[str, list[CostRecord]] = defaultdict(list)
    everything: list[CostRecord] = []
    for r in records:
        groups[r.stratum].append(r)
        everything.append(r)
    return CostReport(
        strata={name: summarise_cost(rows) for name, rows in sorted(groups.items())},
        overall=summarise_cost(everything),
    )
