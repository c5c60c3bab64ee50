"""Drift checks against the real embedded ClickHouse: the pushed-down aggregation, windows, the decision,
``drift_checks`` rows and the gauges. Data is generated in Python with a seeded RNG so every run is the same."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from scipy import stats as sp

from ragmon.config import DriftSettings, DriftWindowSettings
from ragmon.drift.check.check import DriftChecker
from ragmon.drift.check.window_queries import aggregate, to_series
from ragmon.drift.method.features import FEATURES
from ragmon.drift.method.windows import plan
from ragmon.telemetry import Telemetry

NOW = datetime.now(UTC).replace(minute=30, second=0, microsecond=0) - timedelta(hours=1)


def _insert_traces(store, rng, *, n: int, start: datetime, seconds: float, shift: float = 0.0,
                   retriever: str = "hybrid@v1", stratum: str = "billing", empty_rate: float = 0.0,
                   refusal_rate: float = 0.05, tag: str = "", snapshot: str = "2026-11-01",
                   old_version_share: float = 0.0) -> np.ndarray:
    """n traces uniform in [start, start+seconds); returns their top-1 scores."""
    name, version = retriever.split("@")
    level = rng.normal(0.7 + shift, 0.08, size=n)
    scores = [sorted((lv - 0.03 * np.arange(5) + rng.normal(0, 0.02, 5)).tolist(), reverse=True) for lv in level]
    empty = rng.random(n) < empty_rate
    scores = [[] if e else s for s, e in zip(scores, empty, strict=True)]
    offsets = rng.random(n) * seconds
    ids = [f"{tag}{retriever}-{stratum}-{start.timestamp():.0f}-{i}" for i in range(n)]
    store.insert_columns("traces", {
        "trace_id": ids, "query_id": ids,
        "ts": [start + timedelta(seconds=float(o)) for o in offsets],
        "retriever_name": [name] * n, "retriever_version": [version] * n, "variant": ["production"] * n,
        "category": [stratum] * n, "corpus_snapshot": [snapshot] * n,
        "retrieved_chunk_ids": [[f"d{j}@c" for j in range(len(s))] for s in scores],
        "retrieved_doc_ids": [[f"d{j}" for j in range(len(s))] for s in scores],
        "retrieved_doc_versions": [["v1" if rng.random() < old_version_share else "v2" for _ in s] for s in scores],
        "retrieved_scores": scores, "retrieved_ranks": [list(range(1, len(s) + 1)) for s in scores],
        "behaviour": np.where(rng.random(n) < refusal_rate, "refuse", "answer").tolist(),
        "latency_total_ms": rng.gamma(4, 100, size=n).tolist(), "cost_usd": rng.gamma(2, 0.001, size=n).tolist(),
        "ingested_at": [datetime.now(UTC)] * n,
    })
    return np.array([s[0] if s else np.nan for s in scores])


def _same_hours_reference(store, rng, n_per_day: int, **kw) -> np.ndarray:
    cur_start = NOW - timedelta(hours=1)
    parts = [_insert_traces(store, rng, n=n_per_day, start=cur_start - timedelta(days=d), seconds=3600, **kw)
             for d in range(1, 8)]
    return np.concatenate(parts)


def _settings(**kw) -> DriftSettings:
    return DriftSettings(features=["top1_score", "mean_score", "empty_shortlist_rate", "refusal_rate"], **kw)


def test_shift_detected_only_where_injected(store) -> None:
    rng = np.random.default_rng(1)
    for stratum in ("billing", "consent"):
        _same_hours_reference(store, rng, 300, stratum=stratum)
    # other hours of the reference days carry a huge shift: the same-hours reference must ignore them
    _insert_traces(store, rng, n=2000, start=NOW - timedelta(days=3, hours=8), seconds=3600, shift=2.0)
    _insert_traces(store, rng, n=1000, start=NOW - timedelta(hours=1), seconds=3600, stratum="billing", shift=0.1)
    _insert_traces(store, rng, n=1000, start=NOW - timedelta(hours=1), seconds=3600, stratum="consent")

    telemetry = Telemetry()
    result = DriftChecker(store, _settings(), telemetry, clock=lambda: NOW).run_once()

    by = {(r.group.stratum, r.feature, r.test): r for r in result.results}
    assert by["billing", "top1_score", "window_mean"].drifted
    assert by["billing", "mean_score", "window_mean"].drifted
    # the baseline is the same hour of the 7 days before (7 × 300): the off-hours traces are not in it
    assert by["billing", "top1_score", "window_mean"].reference.n == 2100
    assert not any(r.drifted for r in result.results if r.group.stratum == "consent")
    assert not by["billing", "refusal_rate", "window_rate"].drifted
    wm = by["billing", "top1_score", "window_mean"]
    assert (wm.threshold, wm.effect_threshold, wm.min_samples, wm.effect_name) == (0.016, 0.1, 30, "shift_sigma")
    assert wm.details["same_slot_windows"] == 7 and wm.pooled == 1

    labels = dict(retriever="hybrid@v1", variant="production", stratum="billing", feature="top1_score",
                  test="window_mean")
    assert telemetry.registry.get_sample_value("ragmon_drift_detected", labels) == 1.0
    assert telemetry.registry.get_sample_value("ragmon_drift_detected", {**labels, "stratum": "consent"}) == 0.0
    window = {k: v for k, v in labels.items() if k != "test"}
    assert telemetry.registry.get_sample_value("ragmon_drift_sample_size", {**window, "window": "current"}) == 1000
    assert telemetry.registry.get_sample_value("ragmon_drift_last_check_timestamp_seconds") == NOW.timestamp()

    rows = store.query_rows(f"SELECT * FROM {store.table('drift_checks')} WHERE check_id = {{id:String}}",
                            {"id": result.check_id})
    assert len(rows) == len(result.results)
    stored = next(r for r in rows
                  if (r["category"], r["feature"], r["test"]) == ("billing", "top1_score", "window_mean"))
    assert stored["drifted"] == 1 and stored["threshold"] == 0.016 and stored["n_current"] == 1000
    assert stored["status"] == "ok" and stored["pooled_windows"] == 1 and stored["cusum_threshold"] > 0
    assert DriftSettings.model_validate_json(stored["settings"]) == _settings()  # what it ran with
    details = json.loads(stored["details"])
    assert details["status"] == "ok" and len(details["reference"]["quantiles"]) == 101
    assert details["test"]["expected"] == pytest.approx(wm.details["expected"])


def test_pushed_down_aggregation_agrees_with_scipy(store) -> None:
    rng = np.random.default_rng(2)
    ref = _insert_traces(store, rng, n=5000, start=NOW - timedelta(days=2), seconds=86400)
    cur = _insert_traces(store, rng, n=800, start=NOW - timedelta(hours=1), seconds=3600, shift=0.02)
    spec = DriftWindowSettings(reference="pinned", reference_start=NOW - timedelta(days=2),
                               reference_end=NOW - timedelta(days=1))
    wp = plan(spec, NOW)
    (by_window,) = aggregate(store, [FEATURES["top1_score"]], wp).values()
    series = to_series(by_window, "continuous", wp.reference + 1)
    r, c = series.pool(np.arange(1, wp.reference + 1)), series.summary(0)  # 24 windows pooled, the current one
    assert (r.n, c.n) == (5000, 800) and len([w for w in by_window if w > 0]) == 24
    assert r.mean == pytest.approx(ref.mean()) and c.std == pytest.approx(cur.std())
    from ragmon.drift.method.registry import Comparison, get_test

    outcome = get_test("ks").run(Comparison.of_pair(r, c))
    expected = sp.ks_2samp(ref, cur, method="asymp")
    assert outcome.statistic == pytest.approx(expected.statistic, abs=0.01)
    assert outcome.details["wasserstein"] == pytest.approx(sp.wasserstein_distance(ref, cur), abs=0.003)


def test_small_windows_are_insufficient_not_drift(store) -> None:
    rng = np.random.default_rng(3)
    _same_hours_reference(store, rng, 10)
    _insert_traces(store, rng, n=12, start=NOW - timedelta(hours=1), seconds=3600, shift=0.5)
    telemetry = Telemetry()
    result = DriftChecker(store, _settings(), telemetry, clock=lambda: NOW).run_once()
    assert result.results and all(r.status == "insufficient_data" and not r.drifted for r in result.results)
    assert all(r.reason for r in result.results)
    # not assessed, and said so: the group's last assessment is the first check that saw it (now)
    labels = dict(retriever="hybrid@v1", variant="production", stratum="billing", family="traces")
    assert telemetry.registry.get_sample_value("ragmon_drift_last_assessed_timestamp_seconds", labels) == \
        NOW.timestamp()


def test_vanished_groups_leave_the_gauges(store) -> None:
    rng = np.random.default_rng(4)
    _same_hours_reference(store, rng, 200, stratum="billing")
    _insert_traces(store, rng, n=300, start=NOW - timedelta(hours=1), seconds=3600, stratum="billing")
    telemetry = Telemetry()
    checker = DriftChecker(store, _settings(), telemetry, clock=lambda: NOW)
    checker.run_once()
    assert "billing" in _detected_strata(telemetry)
    later = NOW + timedelta(days=30)  # nothing in either window any more
    checker.clock = lambda: later
    result = checker.run_once()
    assert result.results == () and _detected_strata(telemetry) == set()
    labels = dict(retriever="hybrid@v1", variant="production", stratum="billing", feature="top1_score",
                  test="window_mean")
    assert telemetry.registry.get_sample_value("ragmon_drift_detected", labels) is None


def test_judge_fingerprints_are_never_compared(store) -> None:
    rng = np.random.default_rng(5)

    def scores(n: int, start: datetime, seconds: float, fingerprint: str, mean: float) -> None:
        ids = [f"{fingerprint}-{start.timestamp():.0f}-{i}" for i in range(n)]
        store.insert_columns("scores", {
            "trace_id": ids, "query_id": ids,
            "ts": [start + timedelta(seconds=float(o)) for o in rng.random(n) * seconds],
            "scored_at": [datetime.now(UTC)] * n, "retriever_name": ["hybrid"] * n, "retriever_version": ["v1"] * n,
            "variant": ["production"] * n, "category": ["billing"] * n, "metric": ["faithfulness"] * n,
            "value": np.clip(rng.normal(mean, 0.1, n), 0, 1).tolist(), "status": ["ok"] * n,
            "judge_fingerprint": [fingerprint] * n,
        })

    cur_start = NOW - timedelta(hours=1)
    for d in range(1, 8):
        scores(100, cur_start - timedelta(days=d), 3600, "fpA", 0.9)
    scores(400, cur_start, 3600, "fpB", 0.5)  # a new judge: looks like a collapse if mixed with fpA
    scores(400, cur_start, 3600, "fpA", 0.9)
    telemetry = Telemetry()
    result = DriftChecker(store, DriftSettings(features=["faithfulness"]), telemetry, clock=lambda: NOW).run_once()
    by_fp = {(r.group.judge_fingerprint, r.test): r for r in result.results}
    assert by_fp["fpB", "window_mean"].status == "insufficient_data"
    assert by_fp["fpB", "window_mean"].reference.n == 0
    assert by_fp["fpA", "window_mean"].status == "ok" and not by_fp["fpA", "window_mean"].drifted
    labels = dict(retriever="hybrid@v1", variant="production", stratum="billing", test="window_mean")
    assert telemetry.registry.get_sample_value("ragmon_drift_detected", {**labels, "feature": "faithfulness[fpA]"}) == 0


def test_reference_pinned_to_a_corpus_snapshot(store) -> None:
    rng = np.random.default_rng(6)
    two_days = NOW - timedelta(days=2)
    old = _insert_traces(store, rng, n=1500, start=two_days, seconds=86400, snapshot="old", tag="o")
    _insert_traces(store, rng, n=1500, start=two_days, seconds=86400, snapshot="new", shift=0.5, tag="n")
    _insert_traces(store, rng, n=800, start=NOW - timedelta(hours=1), seconds=3600, snapshot="new", tag="c")

    def faithfulness(ids: list[str], start: datetime, seconds: float, mean: float) -> None:
        n = len(ids)
        store.insert_columns("scores", {
            "trace_id": ids, "query_id": ids,
            "ts": [start + timedelta(seconds=float(o)) for o in rng.random(n) * seconds],
            "scored_at": [datetime.now(UTC)] * n, "retriever_name": ["hybrid"] * n, "retriever_version": ["v1"] * n,
            "variant": ["production"] * n, "category": ["billing"] * n, "metric": ["faithfulness"] * n,
            "value": np.clip(rng.normal(mean, 0.05, n), 0, 1).tolist(), "status": ["ok"] * n,
            "judge_fingerprint": ["fp"] * n,
        })

    old_ids = [r["trace_id"] for r in store.query_rows(
        f"SELECT trace_id FROM {store.table('traces')} WHERE corpus_snapshot = 'old'")]
    faithfulness(old_ids[:600], two_days, 86400, 0.9)
    faithfulness([f"x{i}" for i in range(600)], two_days, 86400, 0.5)  # scores of traces of no snapshot "old"
    faithfulness([f"c{i}" for i in range(400)], NOW - timedelta(hours=1), 3600, 0.9)
    windows = DriftWindowSettings(reference="pinned", reference_corpus_snapshot="old")
    settings = DriftSettings(features=["top1_score", "faithfulness"], windows=windows)
    result = DriftChecker(store, settings, clock=lambda: NOW).run_once()
    by = {(r.feature, r.test): r for r in result.results}
    top1 = by["top1_score", "window_mean"]
    assert top1.reference.n == 1500 and top1.reference.mean == pytest.approx(np.mean(old))
    assert not top1.drifted  # the shifted "new" snapshot traces of the same days are not in the reference
    faith = by["faithfulness", "window_mean"]
    assert faith.reference.n == 600 and not faith.drifted
    assert "corpus snapshot old" in top1.windows.reference.describe()


def test_newest_version_share_counts_chunks_of_the_newest_document_version(store) -> None:
    rng = np.random.default_rng(7)
    _same_hours_reference(store, rng, 200, old_version_share=0.05)
    _insert_traces(store, rng, n=500, start=NOW - timedelta(hours=1), seconds=3600, old_version_share=0.5,
                   empty_rate=0.1)
    result = DriftChecker(store, DriftSettings(features=["newest_version_share"]), clock=lambda: NOW).run_once()
    (r,) = result.results
    expected = store.query_rows(
        f"SELECT countIf(v = 'v2') AS k, count() AS n FROM {store.table('traces')} "
        "ARRAY JOIN retrieved_doc_versions AS v "
        "WHERE ts >= {s:DateTime64(3, 'UTC')}", {"s": NOW - timedelta(hours=1)})[0]
    assert (r.current.k, r.current.n) == (expected["k"], expected["n"])  # every doc's newest version is v2
    assert r.reference.value == pytest.approx(0.95, abs=0.02) and r.current.value == pytest.approx(0.5, abs=0.05)
    assert r.drifted and r.test == "window_rate"


def test_max_groups_bounds_the_label_sets(store) -> None:
    rng = np.random.default_rng(8)
    _same_hours_reference(store, rng, 150, stratum="busy")
    _insert_traces(store, rng, n=400, start=NOW - timedelta(hours=1), seconds=3600, stratum="busy")
    _same_hours_reference(store, rng, 50, stratum="quiet")
    _insert_traces(store, rng, n=100, start=NOW - timedelta(hours=1), seconds=3600, stratum="quiet")
    telemetry = Telemetry()
    result = DriftChecker(store, _settings(max_groups=1), telemetry, clock=lambda: NOW).run_once()
    assert {r.group.stratum for r in result.results} == {"busy"} and result.groups_dropped == 1
    assert _detected_strata(telemetry) == {"busy"}


def _detected_strata(telemetry: Telemetry) -> set[str]:
    """The strata with a ``ragmon_drift_detected`` series in a scrape now."""
    return {s.labels["stratum"] for m in telemetry.registry.collect() if m.name == "ragmon_drift_detected"
            for s in m.samples}
