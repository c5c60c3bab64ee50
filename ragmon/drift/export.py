"""Drift results → the ``ragmon_drift_*`` gauges, with bounded labels and no stale series.

Labels: ``retriever`` = ``<name>@<version>``, ``variant``, ``stratum`` (the trace category), ``feature``,
``test`` or ``window``. A judge-score feature gets its judge fingerprint's first 8 characters appended
(``faithfulness[1a2b3c4d]``) only when one check sees several fingerprints for it, so series of different
judges never merge. Each export sets the new label sets first and then removes the ones the check no
longer produced: a scrape never sees a gap that would reset an alert's ``for`` timer.
"""

from __future__ import annotations

import math
import threading
from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from prometheus_client import Gauge

from ragmon.telemetry import Telemetry

if TYPE_CHECKING:
    from ragmon.drift.check import DriftResult


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


class GaugeExporter:
    """Owns the label sets of the drift gauges of one ``Telemetry``."""

    def __init__(self, telemetry: Telemetry):
        t = telemetry
        self._test_gauges: tuple[Gauge, ...] = (t.drift_statistic, t.drift_p_value, t.drift_effect, t.drift_detected)
        self._window_gauges: tuple[Gauge, ...] = (t.drift_sample_size, t.drift_feature_value)
        self._t = t
        self._current: dict[Gauge, set[tuple[str, ...]]] = defaultdict(set)
        self._lock = threading.Lock()

    def export(self, results: Sequence[DriftResult]) -> None:
        t = self._t
        labels = feature_labels(results)
        seen: dict[Gauge, set[tuple[str, ...]]] = defaultdict(set)

        def put(gauge: Gauge, key: tuple[str, ...], value: float) -> None:
            gauge.labels(*key).set(value if math.isfinite(value) else math.nan)
            seen[gauge].add(key)

        with self._lock:
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
            for gauge in (*self._test_gauges, *self._window_gauges):
                for key in self._current[gauge] - seen[gauge]:
                    gauge.remove(*key)
                self._current[gauge] = seen[gauge]

    def label_sets(self) -> Iterable[tuple[str, ...]]:
        """The label sets currently exported on ``ragmon_drift_detected``."""
        return sorted(self._current[self._t.drift_detected])
