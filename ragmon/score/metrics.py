"""The ``ragmon_score_*`` metrics of live scoring (``pipeline.LiveScorer`` and the consume loop), as a metric set made
from the catalogue (``ragmon.telemetry.catalogue``, owner ``score``); registered when a scorer is built (the
``score`` role, ``ragmon score``, the demo). Owns no names or HELP texts."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from prometheus_client import Counter, Gauge

from ragmon.telemetry import MetricSet


@dataclass(frozen=True, slots=True)
class ScoreMetrics(MetricSet):
    """Live scoring's metrics (owner ``score``)."""

    owner: ClassVar[str] = "score"
    score_traces_scored: Counter
    score_failures: Counter
    score_sampling_decisions: Counter
    score_last_batch: Gauge
    score_backlog: Gauge
