"""The hourly cap and the daily budget hold when many judge calls race for their last units."""

from __future__ import annotations

import threading

from ragmon.sampling.sampler import ScoreSampler

NOW = 1_780_000_000.0


def race(n_threads: int, fn) -> list:
    barrier = threading.Barrier(n_threads, timeout=30)
    out: list = []
    lock = threading.Lock()

    def run(i: int) -> None:
        barrier.wait()
        got = fn(i)
        with lock:
            out.append(got)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    return out


def test_sixty_four_threads_racing_for_the_last_five_slots_of_the_hour_get_exactly_five():
    sampler = ScoreSampler(salt="r", rate=1.0, max_per_hour=100, clock=lambda: NOW)
    for i in range(95):
        assert sampler.decide(f"early-{i}").sampled
    decisions = race(64, lambda i: sampler.decide(f"q-{i}").decision.value)
    assert sorted(decisions).count("sampled") == 5 and decisions.count("capped") == 59


def test_racing_calls_reserve_the_budget_so_it_is_never_overspent():
    sampler = ScoreSampler(salt="r", rate=1.0, daily_budget_usd=1.0, clock=lambda: NOW)
    sampler.record_cost(0.5)  # half the day's budget is gone: room for five calls of at most 0.1

    def call(i: int) -> bool:
        decision = sampler.decide(f"q-{i}", cost_estimate=lambda: 0.1)
        if decision.sampled:
            sampler.settle(decision.reserved_usd, 0.1)  # each call really costs its estimate
        return decision.sampled

    admitted = race(64, call)
    assert sum(admitted) == 5
    assert sampler.spent_today_usd <= 1.0 + 1e-9 and sampler.reserved_usd == 0


def test_without_an_estimate_in_flight_calls_would_overspend():
    """The negative control: admitting on spend alone lets every racer in while nothing has been paid yet."""
    sampler = ScoreSampler(salt="r", rate=1.0, daily_budget_usd=1.0, clock=lambda: NOW)
    sampler.record_cost(0.5)
    decisions = race(64, lambda i: sampler.decide(f"q-{i}"))
    for d in decisions:
        if d.sampled:
            sampler.settle(d.reserved_usd, 0.1)
    assert sum(d.sampled for d in decisions) == 64 and sampler.spent_today_usd > 6


def test_a_settled_call_that_cost_less_than_reserved_frees_budget_for_the_next():
    sampler = ScoreSampler(salt="r", rate=1.0, daily_budget_usd=0.3, clock=lambda: NOW)
    first = sampler.decide("a", cost_estimate=lambda: 0.2)
    assert first.sampled and first.reserved_usd == 0.2
    assert sampler.decide("b", cost_estimate=lambda: 0.2).decision.value == "over_budget"
    sampler.settle(first.reserved_usd, 0.05)
    assert sampler.decide("c", cost_estimate=lambda: 0.2).sampled
