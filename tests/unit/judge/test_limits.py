"""CallLimiter: token buckets, the AIMD rate learnt from 429s and Retry-After pauses, on an injected clock."""

from __future__ import annotations

import pytest

from ragmon.judge.limits import DECREASE, MIN_RATE, CallLimiter, Permit, TokenBucket


class Clock:
    def __init__(self):
        self.t = 1000.0

    def __call__(self):
        return self.t


def drive(limiter: CallLimiter, clock: Clock, seconds: float, *, step: float = 0.01, tokens: int = 1,
          answer=lambda permit: 200) -> list[Permit]:
    """Send whenever the limiter allows for ``seconds``, answering each request at once with ``answer``."""
    sent = []
    end = clock.t + seconds
    while clock.t < end:
        got = limiter.try_acquire(tokens)
        if isinstance(got, Permit):
            sent.append(got)
            limiter.release(got, status=answer(got), tokens_used=tokens)
        else:
            clock.t += min(max(got, 1e-6), step)
    return sent


def test_requests_per_minute_paces_to_the_configured_rate_with_one_second_of_burst():
    clock = Clock()
    limiter = CallLimiter(requests_per_minute=600, clock=clock)
    sent = drive(limiter, clock, 10.0)
    assert len(sent) == pytest.approx(10 + 100, abs=2)  # a full bucket of 10, then 10 a second
    assert limiter.limit == pytest.approx(10.0)


def test_tokens_per_minute_reserve_and_settle_with_what_was_used():
    clock = Clock()
    limiter = CallLimiter(tokens_per_minute=6000, clock=clock)  # 100 tokens a second
    first = limiter.try_acquire(100)
    assert isinstance(first, Permit)
    assert limiter.try_acquire(100) == pytest.approx(1.0)  # the bucket is empty for a second
    limiter.release(first, status=200, tokens_used=20)  # only 20 used: 80 come back
    assert isinstance(limiter.try_acquire(80), Permit)


def test_a_request_larger_than_the_bucket_waits_for_a_full_one_instead_of_forever():
    bucket = TokenBucket(60, now=0.0)  # 1 a second, capacity 1
    bucket.take(1, 0.0)
    assert bucket.wait(50, 0.0) == pytest.approx(1.0)
    bucket.take(50, 1.0)
    assert bucket.wait(1, 1.0) == pytest.approx(50.0)  # the debt is paid before the next


def test_the_first_429_sets_a_limit_below_the_rate_sent_and_a_burst_of_429s_cuts_once():
    clock = Clock()
    limiter = CallLimiter(clock=clock)
    permits = []
    for _ in range(50):  # 50 requests over 5 s: 10 a second, no limit yet
        got = limiter.try_acquire(1)
        assert isinstance(got, Permit)
        permits.append(got)
        clock.t += 0.1
    assert limiter.limit is None
    for p in permits[-5:]:  # five 429s for requests sent before the first answer: one cut
        limiter.release(p, status=429)
    assert limiter.limit == pytest.approx(DECREASE * 10, rel=0.05)
    assert limiter.overloads == 5


def test_retry_after_pauses_every_call():
    clock = Clock()
    limiter = CallLimiter(clock=clock, max_pause_seconds=20)
    p = limiter.try_acquire(1)
    limiter.release(p, status=429, retry_after=2.0)
    assert limiter.try_acquire(1) == pytest.approx(2.0)
    clock.t += 2.0
    q = limiter.try_acquire(1)
    assert isinstance(q, Permit)
    limiter.release(q, status=429, retry_after=86_400)  # a silly Retry-After is capped
    assert limiter.try_acquire(1) <= 20.0


def test_additive_increase_only_while_the_limit_holds_calls_back():
    clock = Clock()
    limiter = CallLimiter(clock=clock)
    p = limiter.try_acquire(1)
    clock.t += 1.0
    limiter.release(p, status=429)
    learnt = limiter.limit
    # calls succeed, but the caller sends far below the limit: the limit learns nothing and stays
    for _ in range(20):
        clock.t += 10.0
        q = limiter.try_acquire(1)
        limiter.release(q, status=200)
    assert limiter.limit == learnt
    # now the limit is what holds calls back: it grows by about 1 % of the learnt limit a second
    drive(limiter, clock, 30.0)
    assert limiter.limit == pytest.approx(learnt * 1.3, rel=0.1)


def test_aimd_settles_under_a_provider_limit_with_few_429s():
    """A provider that allows 10 requests a second (one second of burst): the limiter learns the limit, keeps
    above 85 % of it, and is refused less than 2 % of the time once settled."""
    clock = Clock()
    provider = TokenBucket(600, now=clock.t)

    def answer(permit: Permit) -> int:
        if provider.wait(1, clock.t) > 0:
            return 429
        provider.take(1, clock.t)
        return 200

    limiter = CallLimiter(clock=clock)
    drive(limiter, clock, 30.0, answer=answer)  # settle
    before = limiter.overloads
    sent = drive(limiter, clock, 120.0, answer=answer)
    refused = limiter.overloads - before
    assert len(sent) - refused >= 0.85 * 10 * 120
    assert refused < 0.02 * len(sent)


def test_the_adaptive_rate_never_reaches_zero():
    clock = Clock()
    limiter = CallLimiter(clock=clock)
    for _ in range(200):
        got = limiter.try_acquire(1)
        while not isinstance(got, Permit):
            clock.t += got
            got = limiter.try_acquire(1)
        limiter.release(got, status=429)
        clock.t += 0.001
    assert limiter.limit >= MIN_RATE


def test_blocked_callers_go_out_in_the_order_they_came():
    import threading
    import time

    limiter = CallLimiter()
    first = limiter.try_acquire(1)
    limiter.release(first, status=503, retry_after=2.0)  # every caller now waits for the pause (503: no rate cut)
    order: list[int] = []
    threads = []
    for i in range(8):
        t = threading.Thread(target=lambda i=i: order.append(i) if limiter.acquire(1, timeout=30) else None)
        t.start()
        threads.append(t)
        while limiter.waiting < i + 1:  # the next caller arrives only once this one is queued
            time.sleep(0.001)
    for t in threads:
        t.join(30)
    assert order == list(range(8))


# -- the adaptive concurrency -----------------------------------------------------------------------------------

def test_concurrency_grows_to_the_ceiling_while_answers_come_back_as_fast_and_callers_wait():
    from ragmon.judge.limits import INITIAL_CONCURRENCY, AdaptiveConcurrency

    c = AdaptiveConcurrency(ceiling=64)
    assert c.allowed == INITIAL_CONCURRENCY
    for i in range(300):
        c.answered(0.8 + 0.3 * ((i * 37) % 11 - 5) / 5, saturated=True)  # 800 ± 300 ms, no queueing
    assert c.allowed == 64


def test_room_nobody_used_does_not_raise_the_limit():
    from ragmon.judge.limits import AdaptiveConcurrency

    c = AdaptiveConcurrency(ceiling=64)
    for _ in range(300):
        c.answered(0.8, saturated=False)
    assert c.allowed == 8


def test_concurrency_shrinks_when_answers_slow_down_and_never_below_one():
    from ragmon.judge.limits import AdaptiveConcurrency

    c = AdaptiveConcurrency(ceiling=64)
    for _ in range(300):
        c.answered(0.5, saturated=True)
    assert c.allowed == 64
    for _ in range(30):  # the endpoint queues: answers take four times as long
        c.answered(2.0, saturated=True)
    assert c.allowed < 20
    for _ in range(300):
        c.answered(60.0, saturated=False)
    assert c.allowed >= 1


def test_only_answers_teach_the_concurrency_and_a_full_limit_holds_callers():
    clock = Clock()
    limiter = CallLimiter(max_in_flight=3, adaptive_concurrency=False, clock=clock)
    permits = [limiter.try_acquire(1) for _ in range(3)]
    assert all(isinstance(p, Permit) for p in permits) and limiter.concurrency_limit == 3
    assert not isinstance(limiter.try_acquire(1), Permit)  # a fourth waits for a slot
    limiter.release(permits[0], status=None)  # a timeout: the slot is free again
    assert isinstance(limiter.try_acquire(1), Permit)

    adaptive = CallLimiter(max_in_flight=64, clock=clock)
    start = adaptive.concurrency_limit
    for status in (None, 500, 503, 429):  # no answer, or one that says nothing about queueing
        p = adaptive.try_acquire(1)
        clock.t += 0.5
        adaptive.release(p, status=status)
    assert adaptive.concurrency_limit == start and adaptive.concurrency.short is None
