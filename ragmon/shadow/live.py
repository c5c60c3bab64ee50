"""Running shadow comparisons: the ``shadow.comparisons`` of the settings, recomputed over their look-back
window and exported as ``ragmon_shadow_*`` gauges so a dashboard can follow a shadow rollout live.

``run_configured_comparisons`` is what ``ragmon run`` calls every ``shadow.interval_seconds``. One failing
comparison is logged and counted (``ragmon_shadow_runs_total{outcome="error"}``) and never stops the others.
Gauges of a comparison are replaced as a whole on every run, so a stratum that disappeared from the window
does not keep reporting its last value.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from prometheus_client import Gauge

from ragmon.config import Settings, ShadowComparisonSettings
from ragmon.errors import RagmonError
from ragmon.shadow.compare import CompareOptions, compare
from ragmon.shadow.metrics import ShadowMetrics
from ragmon.shadow.pairs import RetrieverRef
from ragmon.shadow.queries import ShadowStore
from ragmon.shadow.result import QUANTILES, ComparisonResult, StratumComparison

log = logging.getLogger(__name__)
#: the gauges need means only; a small bootstrap keeps the periodic run cheap
LIVE_RESAMPLES = 200


def options_for(c: ShadowComparisonSettings, now: datetime) -> CompareOptions:
    return CompareOptions(
        baseline=RetrieverRef.parse(c.baseline, c.baseline_variant, option="shadow.comparisons[].baseline"),
        candidate=RetrieverRef.parse(c.candidate, c.candidate_variant, option="shadow.comparisons[].candidate"),
        since=now - timedelta(seconds=c.window_seconds), until=now, k=c.k, latency_stage=c.latency_stage,
        n_resamples=LIVE_RESAMPLES, top=0,
    )


def run_configured_comparisons(
    store: ShadowStore, settings: Settings, metrics: ShadowMetrics, *,
    clock: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> list[ComparisonResult]:
    """Run every configured comparison once and update the gauges; return the results that succeeded."""
    results = []
    for comparison in settings.shadow.comparisons:
        now = clock()
        try:
            result = compare(store, options_for(comparison, now))
        except RagmonError as exc:
            metrics.shadow_runs.labels(outcome="error").inc()
            log.warning("shadow comparison %s vs %s failed: %s", comparison.baseline, comparison.candidate, exc)
            continue
        export(result, metrics)
        metrics.shadow_last_run.labels(baseline=result.baseline.label, candidate=result.candidate.label).set(
            now.timestamp())
        metrics.shadow_runs.labels(outcome="ok").inc()
        results.append(result)
    return results


_LABELS = ("baseline", "candidate", "stratum")


def _clear(gauge: Gauge, names: tuple[str, ...], baseline: str, candidate: str) -> None:
    """Remove every label set of this (baseline, candidate) pair; ``names`` in the gauge's label order."""
    for family in gauge.collect():
        for sample in family.samples:
            if sample.labels.get("baseline") == baseline and sample.labels.get("candidate") == candidate:
                gauge.remove(*(sample.labels[n] for n in names))


def export(result: ComparisonResult, metrics: ShadowMetrics) -> None:
    """Replace the gauges of this (baseline, candidate) pair with the values of ``result``."""
    b, c = result.baseline.label, result.candidate.label
    for gauge, names in ((metrics.shadow_overlap_at_k, _LABELS), (metrics.shadow_pairs, _LABELS),
                         (metrics.shadow_latency_delta, (*_LABELS, "quantile")),
                         (metrics.shadow_quality_delta, (*_LABELS, "metric"))):
        _clear(gauge, names, b, c)
    for s in [*result.strata, result.overall]:
        _export_stratum(s, b, c, metrics)


def _export_stratum(s: StratumComparison, b: str, c: str, metrics: ShadowMetrics) -> None:
    labels = {"baseline": b, "candidate": c, "stratum": s.stratum}
    metrics.shadow_pairs.labels(**labels).set(s.pairs)
    if s.pairs == 0:
        return
    if math.isfinite(s.agreement.mean_overlap):
        metrics.shadow_overlap_at_k.labels(**labels).set(s.agreement.mean_overlap)
    delta = s.operational.latency_delta_ms()
    if delta is not None:
        for q, value in zip(QUANTILES, delta, strict=True):
            metrics.shadow_latency_delta.labels(**labels, quantile=str(q)).set(value / 1000.0)
    best: dict[str, tuple[int, float]] = {}
    for q in s.quality:  # one value per metric: the judge fingerprint with the most pairs
        if q.result.n and (q.metric not in best or q.result.n > best[q.metric][0]):
            best[q.metric] = (q.result.n, q.result.mean_difference)
    for metric, (_, value) in best.items():
        metrics.shadow_quality_delta.labels(**labels, metric=metric).set(value)
