"""Windows from an injected ``now``, and the per-feature plan resolved from the drift config."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from ragmon.config import DriftFeatureOverride, DriftSettings, DriftWindowSettings
from ragmon.drift.check.window_queries import plan_parameters
from ragmon.drift.method.features import FEATURES, plan_features
from ragmon.drift.method.windows import plan, resolve
from ragmon.errors import ConfigError

NOW = datetime(2026, 12, 2, 14, 20, tzinfo=UTC)


def test_trailing_same_hours() -> None:
    w = resolve(DriftWindowSettings(), NOW)
    assert (w.current.start, w.current.end) == (NOW - timedelta(hours=1), NOW)
    assert w.reference.end == w.current.start
    assert w.reference.start == w.current.start - timedelta(days=7)
    assert (w.reference.slice_anchor, w.reference.slice_seconds) == (w.current.start, 3600)
    wp = plan(DriftWindowSettings(), NOW, lookback=24)
    assert (wp.reference, wp.period, wp.lookback, wp.history) == (168, 24, 24, 193)
    p = plan_parameters(wp)
    assert p["win"] == 3_600_000 and p["hi"] == p["end"] == int(NOW.timestamp() * 1000)
    assert p["lo"] == p["end"] - 193 * 3_600_000
    # window indices: 0 the current hour, 1 the hour before, 24 the same hour yesterday
    assert wp.index(NOW - timedelta(minutes=1)) == 0
    assert wp.index(NOW - timedelta(hours=1)) == 0 and wp.index(NOW - timedelta(hours=1, milliseconds=1)) == 1
    assert wp.index(NOW - timedelta(days=1, minutes=30)) == 24


def test_window_plan_periods_and_pinned_renumbering() -> None:
    assert plan(DriftWindowSettings(same_hours=False), NOW).period == 1
    assert plan(DriftWindowSettings(current_seconds=86400), NOW).period == 1
    assert plan(DriftWindowSettings(current_seconds=5000), NOW).period == 1  # does not divide a day
    assert plan(DriftWindowSettings(current_seconds=5400), NOW).period == 16
    assert plan(DriftWindowSettings(current_seconds=1800), NOW).reference == 7 * 48
    start, end = datetime(2026, 11, 1, tzinfo=UTC), datetime(2026, 11, 8, tzinfo=UTC)
    wp = plan(DriftWindowSettings(reference="pinned", reference_start=start, reference_end=end), NOW)
    # a pinned baseline has no seasonal slots: its windows are renumbered to follow the current one
    assert wp.pinned and wp.lookback == 0 and wp.period == 1
    first, last = wp.index(end - timedelta(milliseconds=1)) - wp.offset, wp.index(start) - wp.offset
    assert first == 1 and last == wp.reference == 7 * 24 + 1  # a range not on window bounds spans one more


def test_trailing_without_same_hours_and_long_windows() -> None:
    assert resolve(DriftWindowSettings(same_hours=False), NOW).reference.slice_seconds is None
    # a window of a day or more has no "same hours"
    assert resolve(DriftWindowSettings(current_seconds=86400), NOW).reference.slice_seconds is None


def test_pinned_dates_and_snapshot() -> None:
    start, end = datetime(2026, 11, 1), datetime(2026, 11, 8)  # naive = UTC
    w = resolve(DriftWindowSettings(reference="pinned", reference_start=start, reference_end=end), NOW)
    assert (w.reference.start, w.reference.end) == (start.replace(tzinfo=UTC), end.replace(tzinfo=UTC))
    assert w.span == (start.replace(tzinfo=UTC), NOW)
    s = resolve(DriftWindowSettings(reference="pinned", reference_corpus_snapshot="2026-10-01"), NOW)
    assert s.reference.corpus_snapshot == "2026-10-01" and s.reference.end == s.current.start
    assert "corpus snapshot 2026-10-01" in s.reference.describe()


def test_now_in_another_timezone_is_converted() -> None:
    from zoneinfo import ZoneInfo

    local = NOW.astimezone(ZoneInfo("Asia/Tokyo"))
    assert resolve(DriftWindowSettings(), local) == resolve(DriftWindowSettings(), NOW)


def test_default_plan_covers_every_feature_with_registry_defaults() -> None:
    plans = {p.feature.name: p for p in plan_features(DriftSettings())}
    assert set(plans) == set(FEATURES)
    first = plans["top1_score"].tests[0]
    assert (first.test.name, first.threshold, first.effect_threshold, first.min_samples) == ("window_mean", 0.016,
                                                                                            0.1, 30)
    assert [t.test.name for t in plans["top1_score"].tests] == ["window_mean", "window_quantiles"]
    assert [t.test.name for t in plans["latency_ms"].tests] == ["window_mean"]
    assert [t.test.name for t in plans["refusal_rate"].tests] == ["window_rate"]


def test_overrides_apply_per_feature() -> None:
    settings = DriftSettings(
        alpha=0.01, min_samples=500, features=["top1_score", "refusal_rate", "latency_ms"],
        overrides={"top1_score": DriftFeatureOverride(tests=["ks"], effect_threshold=0.2,
                                                      windows=DriftWindowSettings(current_seconds=600)),
                   "latency_ms": DriftFeatureOverride(enabled=False)},
    )
    plans = {p.feature.name: p for p in plan_features(settings)}
    assert set(plans) == {"top1_score", "refusal_rate"}
    (ks,) = plans["top1_score"].tests
    assert (ks.threshold, ks.effect_threshold, ks.min_samples) == (0.01, 0.2, 500)
    assert plans["top1_score"].windows.current_seconds == 600
    assert plans["refusal_rate"].windows.current_seconds == 3600


def test_bad_plans_list_every_problem() -> None:
    settings = DriftSettings(
        features=["top1_score", "nope"],
        overrides={"top1_score": DriftFeatureOverride(tests=["two_proportion", "kss"]),
                   "also_nope": DriftFeatureOverride(),
                   "refusal_rate": DriftFeatureOverride(windows=DriftWindowSettings(reference="pinned"))},
    )
    with pytest.raises(ConfigError) as info:
        plan_features(settings)
    text = "\n".join(info.value.problems)
    assert "unknown feature 'nope'" in text and "unknown feature 'also_nope'" in text
    assert "'two_proportion' applies to ['rate'] features; top1_score is continuous" in text
    assert "unknown drift test 'kss'" in text


def test_pinned_reference_needs_dates_or_snapshot() -> None:
    settings = DriftSettings(windows=DriftWindowSettings(reference="pinned", reference_start=NOW,
                                                         reference_end=NOW - timedelta(days=1)))
    with pytest.raises(ConfigError, match="reference_start must be before reference_end"):
        plan_features(settings)
    with pytest.raises(ConfigError, match="needs reference_start and reference_end"):
        plan_features(DriftSettings(windows=DriftWindowSettings(reference="pinned")))


def test_config_rejects_bad_values_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    from ragmon.config import load_settings

    monkeypatch.setenv("RAGMON_DRIFT__ALPHA", "1.5")
    monkeypatch.setenv("RAGMON_DRIFT__WINDOWS__CURRENT_SECONDS", "10")
    with pytest.raises(ConfigError) as info:
        load_settings()
    text = "\n".join(info.value.problems)
    assert "drift.alpha" in text and "drift.windows.current_seconds" in text


def test_a_seasonal_reference_lists_its_same_hour_windows():
    """What the console's reference label shows: seven one-hour windows at the current one's time of day."""
    now = datetime(2026, 12, 5, 10, 0, tzinfo=UTC)
    w = resolve(DriftWindowSettings(current_seconds=3600, reference_days=7, same_hours=True), now)
    slices = w.reference.slices()
    assert len(slices) == 7
    assert slices[0] == (datetime(2026, 12, 4, 9, 0, tzinfo=UTC), datetime(2026, 12, 4, 10, 0, tzinfo=UTC))
    assert slices[-1][0] == w.reference.start
    whole = resolve(DriftWindowSettings(current_seconds=6 * 3600, reference_days=1, same_hours=False), now)
    assert whole.reference.slices() == [(whole.reference.start, whole.reference.end)]
