"""The ``ragmon_drift_*`` gauges as a scrape shows them, from a fixed set of drift results, each on a fresh
``CollectorRegistry``.

The golden files (``golden/drift_gauges_*.prom``) were produced by the hand-kept ``GaugeExporter`` that the
collector replaced; the alert rules, promtool tests, dashboards and the Prometheus end-to-end test depend on
every name, label and value in them staying the same (the HELP lines of the statistic and effect gauges were
widened on purpose when the window tests came).
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, Gauge, generate_latest

from ragmon.drift.check.export import export
from ragmon.drift.check.result import DriftResult
from ragmon.drift.check.window_queries import Group
from ragmon.drift.method.summary import ContinuousSummary, RateSummary, Summary
from ragmon.drift.method.windows import Window, Windows
from ragmon.drift.metrics import DriftMetrics
from ragmon.telemetry import GaugeSpec, Telemetry

NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
WINDOWS = Windows(Window(NOW - timedelta(days=7), NOW - timedelta(hours=1)), Window(NOW - timedelta(hours=1), NOW))
DRIFT_FAMILIES = ("ragmon_drift_statistic", "ragmon_drift_p_value", "ragmon_drift_effect", "ragmon_drift_detected",
                  "ragmon_drift_sample_size", "ragmon_drift_feature_value")


def _result(group: Group, feature: str, test: str, *, statistic: float, p: float, effect: float, drifted: bool,
            reference: Summary, current: Summary, status: str = "ok") -> DriftResult:
    return DriftResult("c0ffee", NOW, group, feature, test, status, statistic, p, p, effect, "effect", 0.05, 0.1,
                       100, drifted, "", reference, current, WINDOWS)


def _cont(n: int, mean: float) -> ContinuousSummary:
    return ContinuousSummary(n, mean, 0.1, ())


BILLING = Group("hybrid", "v1", "production", "billing")
CONSENT = Group("hybrid", "v1", "production", "consent")
SHADOW = Group("dense", "v2", "shadow", "billing")


def fixed_results() -> tuple[DriftResult, ...]:
    """Two tests of one feature (one window series, set twice), a rate, a NaN and an infinite value, and a judge
    feature seen under two fingerprints in one group (its feature label carries the fingerprint prefix)."""
    fp_a = Group("hybrid", "v1", "production", "billing", "1a2b3c4d5e")
    fp_b = Group("hybrid", "v1", "production", "billing", "9f8e7d6c5b")
    return (
        _result(BILLING, "top1_score", "ks", statistic=0.21, p=0.0004, effect=0.35, drifted=True,
                reference=_cont(7000, 0.71), current=_cont(1000, 0.64)),
        _result(BILLING, "top1_score", "psi", statistic=0.12, p=0.01, effect=0.12, drifted=True,
                reference=_cont(7000, 0.71), current=_cont(1000, 0.64)),
        _result(CONSENT, "top1_score", "ks", statistic=0.03, p=0.8, effect=0.02, drifted=False,
                reference=_cont(300, 0.7), current=_cont(40, 0.69)),
        _result(CONSENT, "refusal_rate", "two_proportion", statistic=math.nan, p=math.nan, effect=math.inf,
                drifted=False, reference=RateSummary(300, 15), current=RateSummary(0, 0), status="insufficient_data"),
        _result(SHADOW, "empty_shortlist_rate", "two_proportion", statistic=-2.5, p=0.02, effect=-0.3, drifted=False,
                reference=RateSummary(5000, 50), current=RateSummary(800, 40)),
        _result(fp_a, "faithfulness", "ks", statistic=0.05, p=0.5, effect=0.01, drifted=False,
                reference=_cont(700, 0.9), current=_cont(400, 0.9)),
        _result(fp_b, "faithfulness", "ks", statistic=0.0, p=1.0, effect=0.0, drifted=False,
                reference=ContinuousSummary.empty(), current=_cont(400, 0.5), status="insufficient_data"),
    )


def next_results() -> tuple[DriftResult, ...]:
    """The next check: consent and the shadow retriever are gone, a canary is new, and the judge feature is seen
    under one fingerprint only (its label loses the fingerprint prefix)."""
    fp_a = Group("hybrid", "v1", "production", "billing", "1a2b3c4d5e")
    canary = Group("hybrid", "v2", "canary", "billing")
    return (
        _result(canary, "top1_score", "ks", statistic=0.4, p=0.0001, effect=0.6, drifted=True,
                reference=_cont(6000, 0.7), current=_cont(900, 0.5)),
        _result(BILLING, "top1_score", "ks", statistic=0.02, p=0.9, effect=0.01, drifted=False,
                reference=_cont(7100, 0.71), current=_cont(1100, 0.7)),
        _result(BILLING, "top1_score", "psi", statistic=0.01, p=0.9, effect=0.01, drifted=False,
                reference=_cont(7100, 0.71), current=_cont(1100, 0.7)),
        _result(fp_a, "faithfulness", "ks", statistic=0.04, p=0.6, effect=0.02, drifted=False,
                reference=_cont(710, 0.9), current=_cont(420, 0.89)),
    )


def drift_text(registry: CollectorRegistry) -> str:
    """The exposition lines of the six labelled drift families."""
    return "".join(line + "\n" for line in generate_latest(registry).decode().splitlines()
                   if line.split(" ")[2 if line.startswith("#") else 0].split("{")[0] in DRIFT_FAMILIES)


def golden(name: str) -> str:
    return (Path(__file__).parent / "golden" / name).read_text(encoding="utf-8")


def test_scrape_text_is_unchanged_for_a_fixed_input() -> None:
    telemetry = Telemetry(CollectorRegistry())
    assert drift_text(telemetry.registry) == ""  # no drift set registered: no drift family at all
    drift = telemetry.use(DriftMetrics)  # registered: the families, without series until the first check
    assert drift_text(telemetry.registry) == "".join(line + "\n" for line in golden("drift_gauges_one_check.prom")
                                                     .splitlines() if line.startswith("#"))
    export(drift, fixed_results())
    assert drift_text(telemetry.registry) == golden("drift_gauges_one_check.prom")
    export(drift, next_results())
    # sample order within a family carries no meaning to Prometheus: compared as sorted lines
    assert sorted(drift_text(telemetry.registry).splitlines()) == golden("drift_gauges_next_check.prom").splitlines()


def _labels(group: Group, feature: str, **extra: str) -> dict[str, str]:
    return dict(retriever=group.retriever, variant=group.variant, stratum=group.stratum, feature=feature, **extra)


def test_values_after_one_check() -> None:
    telemetry = Telemetry(CollectorRegistry())
    export(telemetry.use(DriftMetrics), fixed_results())
    value = telemetry.registry.get_sample_value
    assert value("ragmon_drift_detected", _labels(BILLING, "top1_score", test="ks")) == 1.0
    assert value("ragmon_drift_p_value", _labels(BILLING, "top1_score", test="psi")) == 0.01
    assert value("ragmon_drift_sample_size", _labels(CONSENT, "top1_score", window="current")) == 40
    assert math.isnan(value("ragmon_drift_effect", _labels(CONSENT, "refusal_rate", test="two_proportion")))
    assert value("ragmon_drift_feature_value", _labels(SHADOW, "empty_shortlist_rate", window="current")) == 0.05
    assert value("ragmon_drift_statistic", _labels(BILLING, "faithfulness[9f8e7d6c]", test="ks")) == 0.0


def test_a_group_gone_from_the_next_check_is_gone_from_the_scrape() -> None:
    telemetry = Telemetry(CollectorRegistry())
    export(telemetry.use(DriftMetrics), fixed_results())
    export(telemetry.use(DriftMetrics), next_results())
    value = telemetry.registry.get_sample_value
    for name, extra in (("ragmon_drift_detected", {"test": "ks"}), ("ragmon_drift_sample_size", {"window": "current"})):
        assert value(name, _labels(CONSENT, "top1_score", **extra)) is None
        assert value(name, _labels(BILLING, "faithfulness[1a2b3c4d]", **extra)) is None
        assert value(name, _labels(BILLING, "faithfulness", **extra)) is not None
    assert value("ragmon_drift_detected", _labels(Group("hybrid", "v2", "canary", "billing"), "top1_score",
                                                  test="ks")) == 1.0
    export(telemetry.use(DriftMetrics), ())
    assert {s.name for m in telemetry.registry.collect() for s in m.samples if s.name in DRIFT_FAMILIES} == set()


def test_the_snapshot_refuses_series_that_do_not_fit_and_a_second_metric_of_its_names() -> None:
    telemetry = Telemetry(CollectorRegistry())
    drift = telemetry.use(DriftMetrics)
    with pytest.raises(ValueError, match="expected values for"):
        drift.drift_gauges.publish({drift.drift_detected: {("hybrid@v1", "production"): 1.0}})
    stray = GaugeSpec("ragmon_other", "Other.", ())
    with pytest.raises(ValueError, match="got gauge ragmon_other"):
        drift.drift_gauges.publish({stray: {(): 1.0}})
    with pytest.raises(ValueError, match="ragmon_drift_detected"):
        Gauge("ragmon_drift_detected", "A second one.", registry=telemetry.registry)
    assert telemetry.registry.get_sample_value("ragmon_drift_detected", _labels(BILLING, "top1_score", test="ks")) \
        is None


def test_persistence_pooling_and_last_assessed_series() -> None:
    """The CUSUM, persistence and pooling of a feature come from its primary test's row (one series per
    feature, whatever its number of tests); when each group was last assessed, one series per group and feature
    family."""
    from dataclasses import replace

    telemetry = Telemetry(CollectorRegistry())
    rows = fixed_results()
    rows = (replace(rows[0], cusum=5.5, cusum_threshold=4.2, persistent=True, pooled=1),
            replace(rows[1], pooled=1),  # a second test of the same feature: no CUSUM of its own
            replace(rows[2], cusum=0.4, cusum_threshold=4.2, persistent=False, pooled=3), *rows[3:])
    assessed = {("hybrid", "v1", "production", "billing", "traces"): NOW,
                ("hybrid", "v1", "production", "consent", "traces"): NOW - timedelta(hours=7),
                ("hybrid", "v1", "production", "consent", "versions"): NOW}
    export(telemetry.use(DriftMetrics), rows, assessed)
    value = telemetry.registry.get_sample_value
    assert value("ragmon_drift_cusum", _labels(BILLING, "top1_score")) == 5.5
    assert value("ragmon_drift_persistent", _labels(BILLING, "top1_score")) == 1.0
    assert value("ragmon_drift_persistent", _labels(CONSENT, "top1_score")) == 0.0
    assert value("ragmon_drift_pooled_windows", _labels(CONSENT, "top1_score")) == 3.0
    assert value("ragmon_drift_cusum", _labels(CONSENT, "refusal_rate")) is None  # no CUSUM row for it
    last = dict(retriever="hybrid@v1", variant="production", family="traces")
    assert value("ragmon_drift_last_assessed_timestamp_seconds", {**last, "stratum": "billing"}) == NOW.timestamp()
    assert value("ragmon_drift_last_assessed_timestamp_seconds",
                 {**last, "stratum": "consent"}) == (NOW - timedelta(hours=7)).timestamp()
    assert value("ragmon_drift_last_assessed_timestamp_seconds",
                 {**last, "stratum": "consent", "family": "versions"}) == NOW.timestamp()
    export(telemetry.use(DriftMetrics), rows[:1])  # the next check: consent gone, no assessment times
    assert value("ragmon_drift_persistent", _labels(CONSENT, "top1_score")) is None
    assert value("ragmon_drift_last_assessed_timestamp_seconds", {**last, "stratum": "consent"}) is None
