"""The watch's group-sequential boundaries (``ragmon.drift.check.watch``): they spend the window's budget as said, by
simulation of the looks they are derived for, they are lower than the union bound's, and a look pages a collapse
within minutes on simulated composite traffic while the other strata stay quiet."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import special

from ragmon.drift.check.watch import boundaries, look_boundary, look_share, spending


def test_the_boundaries_spend_the_budget_look_by_look() -> None:
    """Brownian looks at j/12 (cumulative means of a window's traces): the first crossing happens at look j with
    probability α(t_j) − α(t_{j−1}), and some look crosses with probability α."""
    alpha, looks = 0.01, 12
    c = np.array(boundaries(alpha, looks))
    rng = np.random.default_rng(31)
    paths = 400_000
    steps = rng.normal(0.0, math.sqrt(1 / looks), size=(paths, looks)).cumsum(axis=1)
    z = steps / np.sqrt(np.arange(1, looks + 1) / looks)
    crossed = np.abs(z) >= c
    first = np.where(crossed.any(axis=1), crossed.argmax(axis=1), -1)
    rate = float((first >= 0).mean())
    sd = math.sqrt(alpha / paths)
    assert rate == pytest.approx(alpha, abs=4 * sd)
    expected = [alpha * (spending((j + 1) / looks) - spending(j / looks)) for j in range(looks)]
    for j in (0, 5, 11):
        got = float((first == j).mean())
        assert got == pytest.approx(expected[j], abs=4 * math.sqrt(expected[j] / paths)), j


def test_exact_boundaries_are_below_the_union_bound_and_pocock_shaped() -> None:
    alpha, looks = 5.8e-5, 12
    exact = boundaries(alpha, looks)
    union = [float(-special.ndtri(alpha * (spending((j + 1) / looks) - spending(j / looks)) / 2))
             for j in range(looks)]
    assert exact[0] == pytest.approx(union[0])  # the first look has nothing before it
    assert all(e <= u + 1e-9 for e, u in zip(exact, union, strict=True))
    assert union[-1] - exact[-1] > 0.15  # the final look gains most: its looks before it are highly correlated
    assert max(exact) - min(exact) < 0.05  # Pocock-type: about one |z| for every look
    # a look's p-value boundary is the two-sided tail of its |z|
    assert look_boundary(alpha, 12, looks) == pytest.approx(2 * special.ndtr(-exact[-1]))


def test_look_numbers_and_the_final_look() -> None:
    assert look_share(120, 300, 3600) == (0, 0.0)  # before the first look
    j, share = look_share(610, 300, 3600)
    assert j == 2 and share == pytest.approx(spending(2 / 12) - spending(1 / 12))
    j, share = look_share(None, 300, 3600)  # at the check, on the complete window
    assert j == 12 and share == pytest.approx(1 - spending(11 / 12))
    total = sum(look_share(k * 300, 300, 3600)[1] for k in range(1, 12)) + look_share(None, 300, 3600)[1]
    assert total == pytest.approx(1.0)


def test_a_collapse_pages_within_minutes_in_its_stratum_only() -> None:
    """Composite traffic at 200 traces per stratum-hour, scores × 0.85 in stratum 0 from the start of the hour: a
    look pages it by 15 minutes (the first look with the 30 traces a test needs is at 10); no look at the other
    strata pages."""
    from ragmon.config import DriftSettings
    from ragmon.drift.check.watch import look
    from ragmon.drift.method.assess import Detector, Planned
    from ragmon.drift.method.features import FEATURES, plan_features
    from ragmon.drift.simulation.draw import Shift
    from ragmon.drift.simulation.offline import History
    from ragmon.drift.simulation.traffic import strata

    plans = {p.feature.name: [Planned(t.test, t.threshold, t.effect_threshold, t.min_samples) for t in p.tests]
             for p in plan_features(DriftSettings(features=[f for f in FEATURES if FEATURES[f].source == "traces"]))}
    detector = Detector()
    history = History(strata("composite", 4, seed=41, days=10), 200, detector.history)
    history.draw(detector.history - 1 + 8)  # the collapse starts at 08:00, when the volume is its daily mean
    history.draw(1, Shift(scale=0.85))
    check = history.check(plans, detector)
    start = (history.hours - 1) / 24
    paged: dict[int, set] = {}
    for j in range(1, 12):
        looked = look(check.entries(until=start + j * 300 / 86400), elapsed_seconds=j * 300, interval_seconds=300,
                      false_alarms_per_day=0.05, detector=detector)
        paged[j] = {x.key for x in looked if x.alarm}
    assert any((0, "top1_score") in paged[j] or (0, "mean_score") in paged[j] for j in (1, 2, 3))
    assert not any(k[0] != 0 for keys in paged.values() for k in keys)
