"""ScoreSampler: deterministic across processes and twins, accurate rates, caps and budget on an injected clock."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragmon.sampling.sampler import Decision, Rate, ScoreSampler, hash_position
from tests.conftest import make_trace

IDS = [f"q-{i}" for i in range(2000)]


class Clock:
    def __init__(self, t: float = 1_780_000_000.0):
        self.t = t

    def __call__(self) -> float:
        return self.t


def test_decisions_identical_in_another_process():
    here = [ScoreSampler(salt="s1", rate=0.3).decide(q).decision.value for q in IDS]
    code = ("import json, sys; from ragmon.sampling.sampler import ScoreSampler; "
            "s = ScoreSampler(salt='s1', rate=0.3); "
            "print(json.dumps([s.decide(q).decision.value for q in json.load(sys.stdin)]))")
    out = subprocess.run([sys.executable, "-c", code], input=json.dumps(IDS), capture_output=True, text=True,
                         check=True, env={"PYTHONHASHSEED": "12345", "PATH": "/usr/bin:/bin"}, cwd=".")
    assert json.loads(out.stdout) == here
    assert 0 < here.count("sampled") < len(IDS)


def test_production_and_shadow_twins_decide_identically():
    s = ScoreSampler(salt="twins", rate=0.5)
    for i in range(300):
        prod = make_trace(query_id=f"q{i}", trace_id=f"p{i}")
        shadow = make_trace(query_id=f"q{i}", trace_id=f"s{i}",
                            retriever={"name": "hybrid", "version": "v2", "variant": "shadow"})
        assert s.decide_trace(prod) == s.decide_trace(shadow)


def test_salt_changes_the_sample():
    a = {q for q in IDS if ScoreSampler(salt="a", rate=0.5).decide(q).sampled}
    b = {q for q in IDS if ScoreSampler(salt="b", rate=0.5).decide(q).sampled}
    assert a != b


@settings(max_examples=25, deadline=None)
@given(rate=st.floats(0.0, 1.0), salt=st.text(min_size=1, max_size=20))
def test_rate_accuracy(rate: float, salt: str):
    n = 4000
    s = ScoreSampler(salt=salt, rate=rate)
    k = sum(s.decide(f"query-{i}").sampled for i in range(n))
    sigma = (n * rate * (1 - rate)) ** 0.5
    assert abs(k - n * rate) <= 5 * sigma + 1  # binomial: 5 sigma fails about once in 3.5 million runs


@given(st.text(max_size=50), st.text(min_size=1, max_size=20))
def test_position_in_unit_interval(query_id: str, salt: str):
    assert 0.0 <= hash_position(salt, query_id) < 1.0


def test_lower_rate_sample_nests_in_higher():
    low = {q for q in IDS if ScoreSampler(salt="n", rate=0.1).decide(q).sampled}
    high = {q for q in IDS if ScoreSampler(salt="n", rate=0.4).decide(q).sampled}
    assert low < high


def test_override_precedence():
    s = ScoreSampler(salt="x", rate=0.1, overrides=[Rate(0.9, category="billing"), Rate(0.5, retriever="bm25"),
                                                   Rate(0.7, retriever="bm25", category="billing")])
    assert s.rate_for("bm25", "billing") == 0.7
    assert s.rate_for("bm25", "consent") == 0.5
    assert s.rate_for("hybrid", "billing") == 0.9
    assert s.rate_for("hybrid", "consent") == 0.1
    assert s.decide("q", "bm25", "billing").rate == 0.7


def test_rate_zero_and_one():
    assert not any(ScoreSampler(salt="z", rate=0.0).decide(q).sampled for q in IDS)
    assert all(ScoreSampler(salt="z", rate=1.0).decide(q).sampled for q in IDS)


@pytest.mark.parametrize("bad", [-0.1, 1.5, float("nan")])
def test_invalid_rate_rejected(bad: float):
    with pytest.raises(ValueError, match="rate must be in"):
        ScoreSampler(salt="s", rate=bad)


def test_hourly_cap_with_injected_clock_keeps_twins_together():
    clock = Clock()
    s = ScoreSampler(salt="c", rate=1.0, max_per_hour=3, clock=clock)
    decisions = [s.decide(q).decision for q in IDS[:10]]
    assert decisions == [Decision.sampled] * 3 + [Decision.capped] * 7
    assert s.decide(IDS[1]).decision is Decision.sampled  # the shadow twin of an admitted query
    clock.t += 3600  # next hour: the cap resets
    assert s.decide(IDS[5]).decision is Decision.sampled
    assert s.decide(IDS[1]).decision is Decision.sampled  # counted again in the new hour
    assert s.decide(IDS[6]).decision is Decision.sampled
    assert s.decide(IDS[7]).decision is Decision.capped


def test_not_sampled_wins_over_cap_and_budget():
    s = ScoreSampler(salt="c", rate=0.0, max_per_hour=0, daily_budget_usd=0.0, clock=Clock())
    assert s.decide("q").decision is Decision.not_sampled


def test_daily_budget_with_injected_clock():
    clock = Clock(86400 * 20600 + 3600)  # 01:00 UTC
    s = ScoreSampler(salt="b", rate=1.0, daily_budget_usd=0.05, clock=clock)
    assert s.decide("q1").sampled
    s.record_cost(0.03)
    assert s.decide("q2").sampled
    s.record_cost(0.03)
    assert s.spent_today_usd == pytest.approx(0.06)
    assert s.decide("q3").decision is Decision.over_budget
    assert s.decide("q1").sampled  # twin of a query admitted this hour still goes through
    clock.t += 23 * 3600  # next UTC day
    assert s.spent_today_usd == 0.0
    assert s.decide("q3").decision is Decision.sampled


def test_negative_cost_rejected():
    with pytest.raises(ValueError):
        ScoreSampler(salt="b", rate=1.0).record_cost(-1.0)


def test_decision_position_is_the_documented_hash():
    s = ScoreSampler(salt="doc", rate=0.5)
    assert all(s.decide(q).position == hash_position("doc", q) for q in IDS[:200])
