"""Drift results → the ``ragmon_drift_*`` gauges, with bounded labels and no stale series.

Labels: ``retriever`` = ``<name>@<version>``, ``variant``, ``stratum`` (the trace category), ``feature``,
``test`` or ``window``; when a group was last assessed, per feature ``family`` (``features.FAMILIES``). A
judge-score feature gets its judge fingerprint's first 8 characters appended (``faithfulness[1a2b3c4d]``) only
when one check sees several fingerprints for it, so series of different judges never merge. Each export publishes
the whole check at once (``DriftMetrics.drift_gauges``, a collector): a group the check no longer produced is gone
from the next scrape, and no scrape sees a gap.
Must not keep label sets of its own, or write anything but the gauges.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from datetime import datetime

from ragmon.drift.check.result import DriftResult
from ragmon.drift.metrics import DriftMetrics
from ragmon.telemetry import GaugeSpec


def feature_labels(results: Sequence[DriftResult]) -> dict[int, str]:
    """The ``feature`` label of each result (by index)."""
    fingerprints: dict[tuple[object, str], set[str]] = defaultdict(set)
    for r in results:
        g = r.group
        fingerprints[(g.retriever, g.variant, g.stratum), r.feature].add(g.judge_fingerprint)
    out = {}
    for i, r in enumerate(results):
        g = r.group
        several = len(fingerprints[(g.retriever, g.variant, g.stratum), r.feature]) > 1
        out[i] = f"{r.feature}[{g.judge_fingerprint[:8]}]" if several and g.judge_fingerprint else r.feature
    return out


def drift_series(metrics: DriftMetrics, results: Sequence[DriftResult],
                 last_assessed: Mapping[tuple[str, str, str, str, str], datetime] | None = None,
                 ) -> dict[GaugeSpec, dict[tuple[str, ...], float]]:
    """The series of one check: per result its test gauges, and both windows' sample size and feature value
    (set once per feature, whatever the number of tests); per feature its CUSUM, persistence and pooling; per
    group and feature family when it was last assessed. A non-finite value is exported as NaN."""
    t = metrics
    series: dict[GaugeSpec, dict[tuple[str, ...], float]] = {
        spec: {} for spec in (t.drift_statistic, t.drift_p_value, t.drift_effect, t.drift_detected,
                              t.drift_sample_size, t.drift_feature_value, t.drift_cusum, t.drift_persistent,
                              t.drift_pooled_windows, t.drift_last_assessed)}
    labels = feature_labels(results)

    def put(spec: GaugeSpec, key: tuple[str, ...], value: float) -> None:
        series[spec][key] = float(value) if math.isfinite(value) else math.nan

    for i, r in enumerate(results):
        g = r.group
        base = (g.retriever, g.variant, g.stratum, labels[i])
        put(t.drift_statistic, (*base, r.test), r.statistic)
        put(t.drift_p_value, (*base, r.test), r.p_adjusted)
        put(t.drift_effect, (*base, r.test), r.effect)
        put(t.drift_detected, (*base, r.test), 1.0 if r.drifted else 0.0)
        for window, summary in (("reference", r.reference), ("current", r.current)):
            put(t.drift_sample_size, (*base, window), float(summary.n))
            put(t.drift_feature_value, (*base, window), summary.value)
        put(t.drift_pooled_windows, base, float(r.pooled))
        if math.isfinite(r.cusum_threshold):  # the feature's primary test carries its CUSUM
            put(t.drift_cusum, base, r.cusum)
            put(t.drift_persistent, base, 1.0 if r.persistent else 0.0)
    for (name, version, variant, stratum, family), at in (last_assessed or {}).items():
        put(t.drift_last_assessed, (f"{name}@{version}", variant, stratum, family), at.timestamp())
    return series


def export(metrics: DriftMetrics, results: Sequence[DriftResult],
           last_assessed: Mapping[tuple[str, str, str, str, str], datetime] | None = None) -> None:
    """Publish one check's results as the drift gauges, replacing the previous check's."""
    metrics.drift_gauges.publish(drift_series(metrics, results, last_assessed))
