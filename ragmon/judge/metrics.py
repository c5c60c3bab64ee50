"""The ``ragmon_judge_*`` metrics (calls, tokens, spend, concurrency and rate limits, the fingerprint in force), as a
metric set made from the catalogue (``ragmon.telemetry.catalogue``, owner ``judge``); registered when a judge, its
pool or the live scorer is built with a process's telemetry (the ``score`` role, ``ragmon score``, the demo). Owns
no names or HELP texts."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from prometheus_client import Counter, Gauge, Histogram

from ragmon.telemetry import MetricSet


@dataclass(frozen=True, slots=True)
class JudgeMetrics(MetricSet):
    """The judge's metrics (owner ``judge``)."""

    owner: ClassVar[str] = "judge"
    judge_calls: Counter
    judge_info: Gauge
    judge_tokens: Counter
    judge_cost_usd: Counter
    judge_in_flight: Gauge
    judge_adaptive_limit: Gauge
    judge_concurrency_limit: Gauge
    judge_queue_wait: Histogram
    judge_rate_limited: Counter
