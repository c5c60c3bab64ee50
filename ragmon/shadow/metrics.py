"""The ``ragmon_shadow_*`` metrics of configured comparisons (``live.run_configured_comparisons``), as a metric set
made from the catalogue (``ragmon.telemetry.catalogue``, owner ``shadow``); registered when the ``shadow`` role is
built. Owns no names or HELP texts."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from prometheus_client import Counter, Gauge

from ragmon.telemetry import MetricSet


@dataclass(frozen=True, slots=True)
class ShadowMetrics(MetricSet):
    """The shadow role's metrics (owner ``shadow``)."""

    owner: ClassVar[str] = "shadow"
    shadow_overlap_at_k: Gauge
    shadow_latency_delta: Gauge
    shadow_quality_delta: Gauge
    shadow_pairs: Gauge
    shadow_last_run: Gauge
    shadow_runs: Counter
