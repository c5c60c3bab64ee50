"""The ``ragmon_golden_coverage_*`` gauges (``check.export``), as a metric set made from the catalogue
(``ragmon.telemetry.catalogue``, owner ``coverage``); registered when the ``coverage`` role is built. Owns no names
or HELP texts."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from prometheus_client import Gauge

from ragmon.telemetry import MetricSet


@dataclass(frozen=True, slots=True)
class CoverageMetrics(MetricSet):
    """The golden-set coverage gauges (owner ``coverage``)."""

    owner: ClassVar[str] = "coverage"
    coverage_distance: Gauge
    coverage_diverged: Gauge
    coverage_under_represented: Gauge
    coverage_last_check: Gauge
