"""The live scorer with many judge calls in flight, against a slow and flaky local provider and chDB: every
trace scored once, failures retried, and the daily budget held while calls race for its last dollars."""

from __future__ import annotations

import pytest
from pydantic import SecretStr

from ragmon.judge.openai import OpenAIJudge
from ragmon.judge.scoring import METRICS
from ragmon.sampling.sampler import ScoreSampler
from ragmon.score.pipeline import LiveScorer
from ragmon.telemetry import Telemetry
from tests.conftest import make_trace
from tests.support.openai_server import FakeOpenAI, Provider

NOW = 1_780_000_000.0


def judge_for(url: str, telemetry: Telemetry | None = None, **kw) -> OpenAIJudge:
    kw.setdefault("backoff_initial_seconds", 0.05)
    kw.setdefault("backoff_max_seconds", 0.5)
    return OpenAIJudge(base_url=url, model="judge-model", api_key=SecretStr("sk-test"), cache_max_entries=0,
                       telemetry=telemetry, **kw)


def test_a_slow_flaky_rate_limited_judge_scores_every_trace_once(store):
    provider = Provider(latency_seconds=0.2, jitter_seconds=0.1, requests_per_minute=900, error_rate=0.2, seed=5)
    tel = Telemetry()
    traces = [make_trace() for _ in range(80)]
    with FakeOpenAI(responder=provider) as srv:
        judge = judge_for(srv.base_url, tel, max_in_flight=16)
        scorer = LiveScorer(store, judge, ScoreSampler(salt="s", rate=1.0), tel, max_in_flight=16,
                            sleep=lambda s: None)
        result = scorer.process(traces, batch_key="flaky")
    assert result.scored == 80 and result.failed == 0
    assert provider.peak_in_flight > 4 and provider.counts["500"] > 0 and provider.counts["429"] > 0
    rows = store.query_rows(f"SELECT trace_id, metric, status FROM {store.table('scores')} FINAL")
    assert len(rows) == 80 * len(METRICS) and {r["trace_id"] for r in rows} == {t["trace_id"] for t in traces}
    get = tel.registry.get_sample_value
    assert get("ragmon_judge_rate_limited_total") == provider.counts["429"]
    assert get("ragmon_judge_calls_in_flight") == 0
    limit = get("ragmon_judge_adaptive_limit_requests_per_second")
    assert 0 < limit < 2 * 900 / 60  # learnt from the 429s (+Inf before the first)


class NoEstimate:
    """The judge without ``estimate_cost_usd``: the budget sees spend only after the calls end."""

    def __init__(self, judge):
        self._judge = judge

    def __getattr__(self, name):
        if name == "estimate_cost_usd":
            raise AttributeError(name)
        return getattr(self._judge, name)


@pytest.mark.parametrize("reserve", [True, False], ids=["reserved", "negative-control"])
def test_calls_racing_for_the_last_dollars_of_the_daily_budget_never_overspend_it(store, reserve):
    # each call costs 200 completion tokens at $1,000 per million: $0.20; the budget has $1.00 left
    provider = Provider(latency_seconds=0.2, prompt_tokens=1000, completion_tokens=200)
    sampler = ScoreSampler(salt="b", rate=1.0, daily_budget_usd=1.0, clock=lambda: NOW)
    with FakeOpenAI(responder=provider) as srv:
        judge = judge_for(srv.base_url, max_in_flight=32, output_usd_per_million_tokens=1000, max_output_tokens=256)
        scorer = LiveScorer(store, judge if reserve else NoEstimate(judge), sampler, max_in_flight=32)
        result = scorer.process([make_trace() for _ in range(40)])
    if reserve:
        assert sampler.spent_today_usd <= 1.0 and result.scored >= 1
        assert result.decisions["over_budget"] == 40 - result.scored and sampler.reserved_usd == 0
    else:  # admitting on what was already spent lets every racer in: eight times the budget
        assert result.scored == 40 and sampler.spent_today_usd == pytest.approx(8.0)
