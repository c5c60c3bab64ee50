"""The demo scenario's thumbs-down burst and history weeks: where they land, and that they stay out of the rest."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest

from ragmon.demo.scenario import Scenario, generate, generate_history, generate_outcomes, unsupported
from ragmon.review.records import iso_week, parse_week

NOW = datetime(2026, 12, 3, 16, 0, tzinfo=UTC)  # a Thursday: the two days and the burst fall in this week


@pytest.fixture(scope="module")
def scenario() -> Scenario:
    return Scenario(n_queries=2_000, history_per_week=80)


@pytest.fixture(scope="module")
def traces(scenario: Scenario) -> list[dict]:
    return generate(scenario, NOW)


def _ts(trace: dict) -> datetime:
    return datetime.fromisoformat(trace["timestamp"])


def test_the_burst_is_thumbs_down_on_the_incidents_unsupported_answers(scenario: Scenario, traces: list[dict]) -> None:
    kind = Counter((t["attributes"].get("demo_feedback", ""), t["category"]) for t in traces)
    burst = [t for t in traces if t["attributes"].get("demo_feedback") == "burst"]
    assert burst and all(t["category"] == scenario.incident_stratum and unsupported(t)
                         and _ts(t) >= scenario.incident_start(NOW) for t in burst)
    candidates = [t for t in traces if t["retriever"]["variant"] != "shadow" and unsupported(t)
                  and t["category"] == scenario.incident_stratum and _ts(t) >= scenario.incident_start(NOW)]
    assert len(burst) == pytest.approx(scenario.thumbs_down_share * len(candidates), rel=0.3)
    thumbs_down = [t for t in traces if t.get("feedback")]
    assert all(t["feedback"] == {"rating": -1} for t in thumbs_down)
    assert not any(t["retriever"]["variant"] == "shadow" for t in thumbs_down)  # shadow answers reach nobody
    background = sum(n for (k, _), n in kind.items() if k == "background")
    users = sum(1 for t in traces if t["retriever"]["variant"] != "shadow")
    assert 0 < background < 4 * scenario.thumbs_down_background * users
    assert scenario.triage_week(NOW) == iso_week(NOW)


def test_outcome_feedback_events_carry_the_traces_own_feedback(scenario: Scenario, traces: list[dict]) -> None:
    events = {(e["query_id"], e["value"]) for e in generate_outcomes(scenario, traces) if e["kind"] == "feedback"}
    for t in traces:
        if t.get("feedback") and t["retriever"]["variant"] != "shadow":
            assert (t["query_id"], -1) in events


def test_history_weeks_end_before_the_two_days_and_hold_both_verdicts(scenario: Scenario,
                                                                      traces: list[dict]) -> None:
    history = generate_history(scenario, NOW)
    weeks = [iso_week(s) for s in scenario.history_week_starts(NOW)]
    assert len(weeks) == scenario.history_weeks and weeks[-1] == iso_week(NOW - timedelta(weeks=1))
    assert len(history) == scenario.history_weeks * scenario.history_per_week
    per_week = Counter(iso_week(_ts(t)) for t in history)
    assert per_week == dict.fromkeys(weeks, scenario.history_per_week)
    assert all(_ts(t) < scenario.start(NOW) and parse_week(iso_week(_ts(t)))[0] <= _ts(t) for t in history)
    assert {t["retriever"]["variant"] for t in history} == {"production"}
    assert not {t["trace_id"] for t in history} & {t["trace_id"] for t in traces}
    share = sum(unsupported(t) for t in history) / len(history)
    assert 0.15 < share < scenario.history_unsupported + 0.05  # refusals stay refusals
    assert not any(t.get("feedback") for t in history)


def test_history_of_a_monday_run_ends_before_the_two_days(scenario: Scenario) -> None:
    monday = datetime(2026, 11, 30, 1, 0, tzinfo=UTC)
    history = generate_history(scenario, monday)
    assert max(_ts(t) for t in history) < scenario.start(monday)
    assert iso_week(max(_ts(t) for t in history)) == iso_week(monday - timedelta(weeks=1))
