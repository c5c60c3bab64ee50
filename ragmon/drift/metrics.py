"""The ``ragmon_drift_*`` metrics of drift checks, looks and hints (``check.check.DriftChecker``, ``check.export``,
``explain.explain_hint``), as a metric set made from the catalogue (``ragmon.telemetry.catalogue``, owner ``drift``);
registered when a checker is built with a process's telemetry (the ``drift`` role, the demo). Owns no names or HELP
texts."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from prometheus_client import Counter, Gauge

from ragmon.telemetry import GaugeSnapshot, GaugeSpec, MetricSet


@dataclass(frozen=True, slots=True)
class DriftMetrics(MetricSet):
    """Drift's metrics (owner ``drift``): its gauges and the snapshots that publish them."""

    owner: ClassVar[str] = "drift"
    drift_statistic: GaugeSpec
    drift_p_value: GaugeSpec
    drift_effect: GaugeSpec
    drift_detected: GaugeSpec
    drift_sample_size: GaugeSpec
    drift_feature_value: GaugeSpec
    drift_cusum: GaugeSpec
    drift_persistent: GaugeSpec
    drift_pooled_windows: GaugeSpec
    drift_last_assessed: GaugeSpec
    drift_watch_alarm: GaugeSpec
    drift_watch_statistic: GaugeSpec
    drift_watch_boundary: GaugeSpec
    drift_time_to_page: GaugeSpec
    drift_last_look: Gauge
    drift_looks: Counter
    drift_explain_top: GaugeSpec
    drift_cusum_threshold: Gauge
    drift_blind_after: Gauge
    drift_last_check: Gauge
    drift_check_duration: Gauge
    drift_checks: Counter
    drift_gauges: GaugeSnapshot
    drift_watch_gauges: GaugeSnapshot
    drift_explain_gauges: GaugeSnapshot
