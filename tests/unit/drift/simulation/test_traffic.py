"""The detector on simulated traffic with production's shapes (``ragmon.drift.simulation.traffic``): no drift, no alarm
— on independent draws, hourly mix variation, trending popular queries, daily seasonality and routine document
updates — while the trace tests it replaced alarm on the same traffic; and injected drifts are caught. A small,
seeded version of ``bench/drift_null.py`` (which measures the rates with intervals)."""

from __future__ import annotations

import numpy as np
import pytest

from ragmon.config import DriftSettings
from ragmon.drift.method.assess import Assessed, Detector, Entry, Planned, assess
from ragmon.drift.method.features import FEATURES, plan_features
from ragmon.drift.method.registry import get_test
from ragmon.drift.method.series import Series
from ragmon.drift.method.summary import ContinuousSummary, RateSummary
from ragmon.drift.simulation.draw import Shift
from ragmon.drift.simulation.traffic import SHAPES, strata

DETECTOR = Detector()
CHECKS = 24


def _plans(features: list[str], tests: list[str] | None = None) -> dict[str, list[Planned]]:
    overrides = {f: {"tests": tests} for f in features} if tests else {}
    return {p.feature.name: [Planned(t.test, t.threshold, t.effect_threshold, t.min_samples) for t in p.tests]
            for p in plan_features(DriftSettings(features=features, overrides=overrides))}


def _history(shape: str, n: int, windows: int, seed: int, shift: dict[int, Shift] | None = None,
             strata_count: int = 4) -> dict[tuple[int, str], list]:
    """Per (stratum, feature) the window summaries, oldest first; ``shift`` by window index from the end."""
    out: dict[tuple[int, str], list] = {}
    gens = strata(shape, strata_count, seed, days=windows / 24 + 1)
    for h in range(windows):
        for s, gen in enumerate(gens):
            back = windows - 1 - h
            drift = (shift or {}).get(back, Shift()) if s == 0 else Shift()
            for name, values in gen.window(n, h % 24, h / 24, drift).items():
                kind = FEATURES[name].kind
                out.setdefault((s, name), []).append(
                    RateSummary.from_samples(values) if kind == "rate" else ContinuousSummary.from_samples(values))
    return out


def _entries(history: dict, plans: dict[str, list[Planned]]) -> list[Entry]:
    return [Entry(key, plans[key[1]], Series.from_summaries(sums[::-1])) for key, sums in history.items()
            if key[1] in plans]


def _alarmed(results: list[Assessed]) -> bool:
    return any(r.decision.drifted for r in results)


SCORES = ["top1_score", "mean_score", "empty_shortlist_rate", "refusal_rate", "latency_ms"]


@pytest.mark.slow
@pytest.mark.parametrize("shape", [s for s in SHAPES if not s.startswith("composite")])  # test_composite_*
def test_no_drift_no_alarm_on_every_traffic_shape(shape: str) -> None:
    features = SCORES + (["newest_version_share"] if shape == "doc_updates" else [])
    history = _history(shape, 300, DETECTOR.history + CHECKS - 1, seed=5)
    entries = _entries(history, _plans(features))
    checks = [assess(entries, DETECTOR, current=c) for c in range(CHECKS)]
    alarmed = sum(_alarmed(r) for r in checks)
    persistent = sum(any(a.cusum is not None and a.cusum.alarm for a in r) for r in checks)
    print(f"{shape}: {alarmed} of {CHECKS} checks declared drift, {persistent} had a persistent alarm")
    assert alarmed <= 3 and persistent <= 1  # nominal: 5 % of checks (1.2 of 24) and 0.1 alarm a day


@pytest.mark.slow
def test_the_trace_tests_alarm_on_the_same_heterogeneous_traffic() -> None:
    """Negative control: KS and the two-proportion test on the same hours of mix-varying traffic alarm in most
    checks, so the test above can fail."""
    features = SCORES
    history = _history("mix", 1000, 24 * 7 + 1 + CHECKS, seed=6)
    plans = {f: [Planned(get_test(t), 0.05, get_test(t).default_effect_threshold, get_test(t).default_min_samples)]
             for f, t in zip(features, ("ks", "ks", "two_proportion", "two_proportion", "ks"), strict=True)}
    entries = _entries(history, plans)
    alarmed = sum(_alarmed(assess(entries, DETECTOR, current=c)) for c in range(CHECKS))
    assert alarmed >= CHECKS // 2


def _caught(history: dict, features: list[str], watched: tuple[str, ...], *, cusum: bool = True) -> bool:
    results = assess(_entries(history, _plans(features)), DETECTOR)
    return any((r.decision.drifted or (cusum and r.cusum is not None and r.cusum.alarm))
               for r in results if r.key[0] == 0 and r.key[1] in watched)


@pytest.mark.slow
@pytest.mark.parametrize("shape", ["iid", "mix", "trending"])
def test_a_half_sigma_score_shift_is_caught_in_one_window(shape: str) -> None:
    probe = _history(shape, 200, DETECTOR.history, seed=7)
    sd = float(np.std([s.mean for s in probe[(0, "top1_score")]]) + probe[(0, "top1_score")][0].std)
    caught = sum(_caught(_history(shape, 200, DETECTOR.history, seed=100 + i, shift={0: Shift(add=0.5 * sd)}),
                         SCORES, ("top1_score", "mean_score"), cusum=False) for i in range(4))
    assert caught >= 3


@pytest.mark.slow
@pytest.mark.parametrize("size", [50, 1000])
def test_score_collapse_and_empty_shortlists_are_caught_from_50_traces(size: int) -> None:
    collapse = _history("mix", size, DETECTOR.history, seed=8, shift={0: Shift(scale=0.8), 1: Shift(scale=0.8)})
    assert _caught(collapse, SCORES, ("top1_score", "mean_score"))
    empty = _history("mix", size, DETECTOR.history, seed=9,
                     shift={0: Shift(extra_empty=0.1), 1: Shift(extra_empty=0.1)})
    assert _caught(empty, SCORES, ("empty_shortlist_rate",))


@pytest.mark.slow
def test_a_stale_index_is_caught_and_routine_updates_are_not() -> None:
    """An index frozen for a day serves more superseded versions every hour (how many depends on which documents
    were updated since: popular ones show at once); routine updates served on time never alarm."""
    features = ["newest_version_share"]
    for seed in (10, 12):
        healthy = _history("doc_updates", 200, DETECTOR.history, seed=seed, strata_count=2)
        assert not _caught(healthy, features, ("newest_version_share",))
        start = (DETECTOR.history - 24) / 24
        stale = _history("doc_updates", 200, DETECTOR.history, seed=seed, strata_count=2,
                         shift={back: Shift(stale_since=start) for back in range(24)})
        assert _caught(stale, features, ("newest_version_share",))


def test_low_traffic_is_pooled_not_left_blind() -> None:
    history = _history("iid", 12, DETECTOR.history, seed=11, strata_count=1)
    results = assess(_entries(history, _plans(["top1_score", "refusal_rate"])), DETECTOR)
    mean = next(r for r in results if r.key[1] == "top1_score" and r.planned.test.name == "window_mean")
    assert mean.decision.status == "ok" and mean.pooled == 3  # 12 an hour: three hours reach the 30 it needs
    unpooled = assess(_entries(history, _plans(["top1_score"])), Detector(max_pool=1))
    assert all(r.decision.status == "insufficient_data" for r in unpooled)


@pytest.mark.slow
def test_a_rare_rate_is_pooled_until_its_block_expects_an_event() -> None:
    """Empty shortlists are about 1 % of traces: at 50 traces an hour a window expects half of one, so no rise could
    reach significance in it; two or three windows are pooled, to one expected event (refusals, about 6 %, are not;
    nor is anything at 200)."""
    plans = _plans(["empty_shortlist_rate", "refusal_rate"])

    def pooled(size: int, seed: int, shift: dict[int, Shift] | None = None) -> dict[str, Assessed]:
        history = _history("mix", size, DETECTOR.history, seed=seed, shift=shift, strata_count=1)
        return {r.key[1]: r for r in assess(_entries(history, plans), DETECTOR)}

    low = pooled(50, 13)
    assert low["empty_shortlist_rate"].pooled in (2, 3) and low["refusal_rate"].pooled == 1
    assert low["empty_shortlist_rate"].decision.status == "ok"
    assert pooled(200, 13)["empty_shortlist_rate"].pooled == 1
    rise = pooled(50, 14, shift={0: Shift(extra_empty=0.1), 1: Shift(extra_empty=0.1)})["empty_shortlist_rate"]
    assert rise.pooled in (2, 3) and rise.decision.drifted
    # a share never seen to move (no event in the reference) is not pooled for events it cannot expect
    never = Series("rate", np.full(DETECTOR.history, 50), k=np.zeros(DETECTOR.history, np.int64))
    assert assess([Entry("never", plans["empty_shortlist_rate"], never)], DETECTOR)[0].pooled == 1


def test_query_adjusted_scores_take_trending_popularity_out_and_keep_a_shift() -> None:
    from ragmon.drift.simulation.by_query import adjust_by_query

    (gen,) = strata("trending", 1, seed=11, days=3)
    draws = [gen.draw(1000, h % 24, h / 24, Shift(add=0.02) if h == 59 else Shift()) for h in range(60)]
    windows = [(d.queries[~d.empty], d.features()["top1_score"]) for d in reversed(draws)]  # newest first
    adjusted = adjust_by_query(windows, range(1, 49))
    raw_means = np.array([np.mean(v) for _, v in windows])
    adjusted_means = np.array([np.mean(v) for v in adjusted])
    # which queries were popular moves the hourly mean; the same queries' scores do not
    assert np.std(adjusted_means[1:49]) < np.std(raw_means[1:49]) / 3
    spread = np.std(adjusted_means[1:49])
    assert adjusted_means[0] - np.mean(adjusted_means[1:49]) > 5 * spread
    assert adjusted_means[0] - np.mean(adjusted_means[1:49]) == pytest.approx(0.02, abs=0.006)


@pytest.mark.slow  # a simulation of days of composite traffic (9–13 s)
def test_composite_traffic_has_every_shape_at_once() -> None:
    """70 % recurring questions with habits of their own (always empty, always refused, a fixed shortlist length,
    their own latency), bursts of new questions, quieter weekends, and a daily document update at 03:00."""
    from ragmon.drift.simulation.traffic import COMPOSITE_POOL, DAILY_UPDATE_HOUR

    (gen,) = strata("composite", 1, seed=21, days=9)
    draws = [gen.draw(1000, h % 24, h / 24) for h in range(9 * 24)]
    keys = np.concatenate([d.queries for d in draws])
    recurring = keys < COMPOSITE_POOL
    assert 0.6 < recurring.mean() < 0.75
    empty = np.concatenate([d.empty for d in draws])
    refused = np.concatenate([d.refused for d in draws])
    n_results = np.concatenate([d.n_results for d in draws])
    latency = np.concatenate([d.latency_ms for d in draws])
    by_question: dict[int, list[int]] = {}
    for i, q in enumerate(keys):
        if q < COMPOSITE_POOL:
            by_question.setdefault(int(q), []).append(i)
    asked = {q: np.array(ix) for q, ix in by_question.items() if len(ix) >= 30}
    always_empty = [q for q, ix in asked.items() if empty[ix].all()]
    always_refused = [q for q, ix in asked.items() if refused[ix].all()]
    assert always_empty and always_refused
    # a question retrieves the same number of chunks every time (when not empty)
    for ix in asked.values():
        assert np.unique(n_results[ix][~empty[ix]]).size <= 1
    # a question has its own latency: the spread of question means is far beyond their sampling noise
    means = np.array([np.log(latency[ix]).mean() for ix in asked.values()])
    assert means.std() > 0.2
    # bursts: new questions asked many times within a few hours
    bursts = [q for q in np.unique(keys[~recurring]) if (keys == q).sum() >= 20]
    assert bursts
    # weekends (days 5 and 6) are quieter at the same hour
    volume = np.array([d.times.size for d in draws]).reshape(9, 24)
    assert volume[5:7].sum() < 0.7 * volume[0:5].mean(axis=0).sum() * 2
    # the document update is daily at 03:00
    published = gen.corpus.published
    assert np.allclose((published * 24) % 24, DAILY_UPDATE_HOUR)


@pytest.mark.slow  # a simulation of days of composite traffic (9–13 s)
def test_composite_traffic_without_drift_does_not_alarm_and_a_collapse_does() -> None:
    """The check adjusted for the question (the default, as in ClickHouse) over a day of composite traffic: at most
    the nominal share of checks alarms; scores × 0.85 in one stratum are caught."""
    from ragmon.drift.simulation.offline import History

    plans = _plans([f for f in FEATURES if FEATURES[f].source == "traces"])
    history = History(strata("composite", 4, seed=22, days=10), 300, DETECTOR.history)
    history.draw(DETECTOR.history - 1)
    alarmed = persistent = 0
    for _ in range(CHECKS):
        history.draw(1)
        results = assess(history.check(plans, DETECTOR).entries(), DETECTOR)
        alarmed += _alarmed(results)
        persistent += any(a.cusum is not None and a.cusum.alarm for a in results)
    print(f"composite: {alarmed} of {CHECKS} checks declared drift, {persistent} had a persistent alarm")
    assert alarmed <= 3 and persistent <= 1
    history.draw(1, Shift(scale=0.85))
    results = assess(history.check(plans, DETECTOR).entries(), DETECTOR)
    assert any(r.decision.drifted for r in results if r.key == (0, "top1_score"))
    assert not any(r.decision.drifted for r in results if r.key[0] != 0)


def test_a_rate_never_seen_to_move_adjusted_for_the_question_is_not_drift() -> None:
    """No empty shortlist in the whole history: adjusted for the question, every level is 0 and every window's
    sampling variance Σ p(1 − p) is 0. The window test takes the continuity share's variance, as it does unadjusted
    (the demo's four strata were PERSISTENT on empty_shortlist_rate with z = −4.5 and effect 0 when the adjusted
    variance of 0 made a window of 300 traces count as 30,000)."""
    plans = _plans(["empty_shortlist_rate"])
    n = np.full(DETECTOR.history, 300)
    never = Series("rate", n, k=np.zeros(DETECTOR.history), var=np.zeros(DETECTOR.history))
    (result,) = assess([Entry(("g", "empty_shortlist_rate"), plans["empty_shortlist_rate"], never)], DETECTOR)
    assert abs(result.decision.outcome.statistic) < 1 and not result.cusum.alarm
