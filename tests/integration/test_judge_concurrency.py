"""How many judge calls the score path keeps in flight against a real local OpenAI-compatible endpoint, with the
settings as shipped: the adaptive limit finds the concurrency the endpoint sustains (it is not stuck at a small
fixed number), and backs off from an endpoint whose answers slow down as it gets busier."""

from __future__ import annotations

import threading
import time

from ragmon.config import JudgeSettings
from ragmon.judge import JudgeInput
from ragmon.judge.openai import OpenAIJudge
from ragmon.judge.pool import JudgePool
from ragmon.telemetry import Telemetry
from tests.conftest import make_trace
from tests.support.openai_server import FakeOpenAI, Provider, ok, verdicts_for


def _judge_many(judge: OpenAIJudge, n: int) -> None:
    items = [JudgeInput.of(make_trace(trace_id=f"c{i}", question=f"question {i}?")) for i in range(n)]
    pool = JudgePool.for_judge(judge, JudgeSettings().max_in_flight)
    try:
        for future in pool.map(judge.assess, items):
            future.result()
    finally:
        pool.close()


def test_with_the_shipped_settings_the_judge_keeps_more_than_eight_calls_in_flight():
    """A remote endpoint that answers in the same time however busy: the default settings must not hold the
    score path at 8 calls at once (8.5 traces/s at 800 ms; docs/judges.md)."""
    provider = Provider(latency_seconds=0.2)
    with FakeOpenAI(responder=provider) as server:
        settings = JudgeSettings(kind="openai", base_url=server.base_url, model="judge-model", cache_max_entries=0)
        judge = OpenAIJudge.from_settings(settings, telemetry=Telemetry())
        _judge_many(judge, 400)
    assert provider.counts["ok"] == 400
    assert provider.peak_in_flight > 16, provider.peak_in_flight


class Congested:
    """An endpoint that serves ``slots`` calls at once and queues the rest (a self-hosted model): an answer takes
    ``base`` seconds times the calls ahead of it in line, divided by the slots."""

    def __init__(self, slots: int, base: float):
        self.slots, self.base = slots, base
        self.in_flight = self.peak = 0
        self._lock = threading.Lock()

    def __call__(self, request: dict):
        with self._lock:
            self.in_flight += 1
            self.peak = max(self.peak, self.in_flight)
            waves = (self.in_flight + self.slots - 1) // self.slots
        time.sleep(self.base * waves)
        with self._lock:
            self.in_flight -= 1
        return ok(verdicts_for(request))


def test_the_limit_backs_off_from_an_endpoint_that_queues():
    endpoint = Congested(slots=4, base=0.05)
    with FakeOpenAI(responder=endpoint) as server:
        settings = JudgeSettings(kind="openai", base_url=server.base_url, model="judge-model", cache_max_entries=0)
        judge = OpenAIJudge.from_settings(settings, telemetry=Telemetry())
        _judge_many(judge, 600)
        settled = judge.limiter.concurrency_limit
    assert settled is not None and settled < JudgeSettings().max_in_flight / 2, settled
