"""Pages within minutes (``ragmon.drift.check.watch``) against the real embedded ClickHouse: a look at the window in
progress reads only the traces before it, pages a collapse in its stratum within minutes with the time to page
exported, leaves the other strata alone, and the role looks on its schedule between checks."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import pytest

from ragmon.config import DriftSettings
from ragmon.drift.check.check import DriftChecker
from ragmon.drift.check.schedule import DriftRole
from ragmon.drift.simulation.draw import Shift
from ragmon.drift.simulation.simulate import ShapedSpec, insert_shaped
from ragmon.telemetry import Telemetry
from tests.support.clocks import ManualClock

T = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)  # the last check; the window in progress is [T, T + 1 h)
STRATA = ("billing", "consent", "security", "returns")
FEATURES = ["top1_score", "mean_score", "empty_shortlist_rate", "refusal_rate", "latency_ms"]


@pytest.fixture
def collapsed(store):
    """Eight days of mixed traffic at 200 traces per stratum-hour; billing's scores × 0.85 from T on (the whole
    hour after T is stored, as if written ahead: a look must not read past its own time)."""
    insert_shaped(store, ShapedSpec("mix", 200, 8, T + timedelta(hours=1), strata=STRATA, shift=Shift(scale=0.85),
                                    drift_hours=1, drift_strata=("billing",), seed=3))
    return store


def _gauge(telemetry: Telemetry, name: str, stratum: str, feature: str) -> float | None:
    return telemetry.registry.get_sample_value(name, {"retriever": "hybrid@v1", "variant": "production",
                                                      "stratum": stratum, "feature": feature})


def test_a_collapse_pages_within_minutes_in_its_stratum_only(collapsed) -> None:
    clock = ManualClock(T)
    telemetry = Telemetry()
    checker = DriftChecker(collapsed, DriftSettings(features=FEATURES), telemetry, clock=clock)
    checker.run_once()  # the check at T: history only, nothing pages
    assert _gauge(telemetry, "ragmon_drift_time_to_page_seconds", "billing", "top1_score") is None
    clock.now = T + timedelta(minutes=10)
    look = checker.look_once(T)
    paged = {(x.key[0].stratum, x.key[1]) for x in look.alarms}
    assert ("billing", "top1_score") in paged and ("billing", "mean_score") in paged
    assert {s for s, _ in paged} == {"billing"}
    # only the traces before the look were read: ten minutes of the hour, about 33 of 200
    billing = next(x for x in look.looked if x.key[0].stratum == "billing" and x.key[1] == "top1_score")
    assert 15 <= billing.n <= 60 and billing.look == 2 and billing.p_value <= billing.boundary
    assert _gauge(telemetry, "ragmon_drift_watch_alarm", "billing", "top1_score") == 1
    assert _gauge(telemetry, "ragmon_drift_watch_alarm", "consent", "top1_score") == 0
    assert _gauge(telemetry, "ragmon_drift_time_to_page_seconds", "billing", "top1_score") == 600
    assert abs(_gauge(telemetry, "ragmon_drift_watch_boundary", "consent", "top1_score")) > 4
    # the check at the hour's end: the collapse is persistent drift, still paged since the look
    clock.now = T + timedelta(hours=1)
    check = checker.run_once()
    assert any(r.persistent for r in check.results if r.group.stratum == "billing" and r.feature == "top1_score")
    assert _gauge(telemetry, "ragmon_drift_watch_alarm", "billing", "top1_score") == 1
    assert _gauge(telemetry, "ragmon_drift_time_to_page_seconds", "billing", "top1_score") == 600


def test_without_drift_a_look_pages_nothing(store) -> None:
    insert_shaped(store, ShapedSpec("mix", 200, 8, T + timedelta(hours=1), strata=STRATA, seed=4))
    clock = ManualClock(T)
    telemetry = Telemetry()
    checker = DriftChecker(store, DriftSettings(features=FEATURES), telemetry, clock=clock)
    checker.run_once()
    for minutes in range(10, 60, 5):  # at 5 minutes a window of 200 an hour holds ~17: too few to look
        clock.now = T + timedelta(minutes=minutes)
        look = checker.look_once(T)
        assert look.looked and not look.alarms
    assert telemetry.registry.get_sample_value("ragmon_drift_looks_total", {"outcome": "ok"}) == 10


def test_the_role_looks_between_checks(store) -> None:
    insert_shaped(store, ShapedSpec("iid", 60, 8, T + timedelta(hours=1), strata=("billing",), seed=5))
    clock = ManualClock(T)
    telemetry = Telemetry()
    checker = DriftChecker(store, DriftSettings(features=["top1_score"]), telemetry, clock=clock)
    stop = threading.Event()
    role = DriftRole(checker, 3600, wait=clock.wait, look_seconds=900,
                     on_result=lambda result: stop.set() if role.checks_run == 2 else None)
    role.run(stop)
    # a check at T, looks at T + 15, 30 and 45 minutes, the next check at T + 1 h
    assert role.checks_run == 2 and role.looks_run == 3
    assert clock.waits == [900, 900, 900, 900]
    assert telemetry.registry.get_sample_value("ragmon_drift_last_look_timestamp_seconds") == \
        (T + timedelta(minutes=45)).timestamp()
