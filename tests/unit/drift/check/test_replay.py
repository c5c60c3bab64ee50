"""Carrying a replay's z-scores from one check to the next (``ragmon.drift.check.replay``): a check given the previous
check's z-scores is the same check, to the last bit, whether its windows are the same (carried) or not (computed
afresh); pooled blocks, pinned references and windows of another length are never carried."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np

from ragmon.config import DriftSettings, DriftWindowSettings
from ragmon.drift.check.replay import ZReuse
from ragmon.drift.method.assess import Detector, Entry, Planned, assess
from ragmon.drift.method.features import plan_features
from ragmon.drift.method.series import Series
from ragmon.drift.method.summary import ContinuousSummary, RateSummary
from ragmon.drift.method.windows import plan

DETECTOR = Detector()
NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
CHECKS = 6


def _plans() -> dict[str, list[Planned]]:
    return {p.feature.name: [Planned(t.test, t.threshold, t.effect_threshold, t.min_samples) for t in p.tests]
            for p in plan_features(DriftSettings(features=["top1_score", "empty_shortlist_rate"]))}


def _history(n: int, seed: int) -> dict[str, list]:
    """Window summaries, oldest first, of a score and a rate; a shift in the score's last 10 windows."""
    rng = np.random.default_rng(seed)
    windows = DETECTOR.history + CHECKS
    score = [ContinuousSummary.from_samples(rng.normal(0.7 - (0.05 if w >= windows - 10 else 0), 0.1, n))
             for w in range(windows)]
    rate = [RateSummary.from_samples(rng.random(n) < 0.05) for _ in range(windows)]
    return {"top1_score": score, "empty_shortlist_rate": rate}


def _entries(history: dict[str, list], check: int, plans: dict[str, list[Planned]],
             changed: str | None = None) -> list[Entry]:
    """The entries of the check ``check`` windows before the newest; ``changed``: that feature's oldest window of
    this check differs from what earlier checks saw (a moved question level does that)."""
    out = []
    for name, sums in history.items():
        end = len(sums) - check
        newest_first = sums[end - DETECTOR.history:end][::-1]
        if name == changed:
            s = newest_first[-1]
            newest_first[-1] = ContinuousSummary(s.n, s.mean + 0.01, s.std, s.quantiles)
        out.append(Entry(("g", name), plans[name], Series.from_summaries(newest_first)))
    return out


def _same(a, b) -> bool:
    return [(x.key, x.planned.test.name, x.decision.outcome.statistic if x.decision.outcome else None,
             x.cusum.statistic if x.cusum else None) for x in a] == \
        [(x.key, x.planned.test.name, x.decision.outcome.statistic if x.decision.outcome else None,
          x.cusum.statistic if x.cusum else None) for x in b]


def _plans_by_id(entries: list[Entry], **spec: object) -> dict[int, object]:
    wp = plan(DriftWindowSettings(**spec), NOW)
    return {id(e): wp for e in entries}


def test_a_check_given_the_previous_checks_z_scores_is_the_same_check() -> None:
    plans = _plans()
    history = _history(200, seed=3)
    reuse = ZReuse(3600)
    carried = []
    for check in range(CHECKS - 1, -1, -1):
        changed = "top1_score" if check == 2 else None  # that check's score windows are not the previous ones
        entries = _entries(history, check, plans, changed)
        cache = reuse.advance(entries, _plans_by_id(entries))
        carried.append({key for key, _, _, _ in cache})
        assert _same(assess(entries, DETECTOR, cache=cache), assess(_entries(history, check, plans, changed), DETECTOR))
    # nothing before the first check; then both features every check but the one whose score windows changed (the
    # next check shares with it only windows its z-scores were computed from, and takes them)
    both = {("g", "top1_score"), ("g", "empty_shortlist_rate")}
    assert carried == [set(), both, both, {("g", "empty_shortlist_rate")}, both, both]


def test_pooled_pinned_and_other_lengths_are_never_carried() -> None:
    plans = _plans()
    few = _history(10, seed=4)  # 10 traces a window: pooled, so blocks start at each check's own window
    reuse = ZReuse(3600)
    for check in (1, 0):
        entries = _entries(few, check, plans)
        cache = reuse.advance(entries, _plans_by_id(entries))
        assert cache == {}
        results = assess(entries, DETECTOR, cache=cache)
        assert all(r.pooled > 1 for r in results) and cache  # computed, and not carried to the next check
    history = _history(200, seed=5)
    for spec in ({"current_seconds": 7200},
                 {"reference": "pinned", "reference_start": NOW - timedelta(days=9),
                  "reference_end": NOW - timedelta(days=2)}):
        reuse = ZReuse(3600)
        for check in (1, 0):
            entries = _entries(history, check, plans)
            cache = reuse.advance(entries, _plans_by_id(entries, **spec))
            assert cache == {}
            assess(entries, DETECTOR, cache=cache)
