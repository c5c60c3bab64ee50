"""Keeping judge calls under the provider's limits: token buckets, an adaptive (AIMD) request rate and an adaptive
concurrency.

``TokenBucket`` refills continuously at a per-minute rate with one second of burst; a request may take more than
is left (the bucket goes into debt), so a large prompt waits its turn instead of forever. ``AdaptiveRate`` is the
request rate the provider tolerates, learnt from its answers: unlimited until the first 429, then cut to 90 % of
the rate actually sent (multiplicative decrease, at most once per round of calls: answers to requests sent before
the last cut say nothing about the new rate) and raised again by 1 % of that learnt limit per second while calls
succeed and the limit is what holds them back (additive increase). ``AdaptiveConcurrency`` is how many calls the
endpoint serves at once without queueing them, learnt from its latency (a gradient limit, as Netflix's
concurrency-limits ``Gradient2``): it starts at ``INITIAL_CONCURRENCY``, grows by about √limit per round of
answers while they come back within ``LATENCY_TOLERANCE`` of the long-run average and callers wait for a slot, and
shrinks in proportion when answers slow down (an endpoint that queues: a self-hosted model with a few slots),
between 1 and the ceiling (``judge.max_in_flight``). Answers slower than the tolerance do not enter the long-run
average (queueing must not become the norm it is measured against); they raise it by a small step instead. Only answered
calls teach it: a timeout or a 5xx says nothing about queueing, and a 429 is the rate's business. ``CallLimiter``
combines them with the configured ``requests_per_minute`` and ``tokens_per_minute`` and a global pause on
``Retry-After``.

The decisions (``CallLimiter.try_acquire``/``release``) are pure functions of an injected clock, so tests drive
them without sleeping; ``acquire`` is the blocking loop around them, and keeps the judge's gauges (requests in
flight, the limit in force, 429s, time waited). Thread-safe (one lock). Nothing here does I/O or knows more of
HTTP than a status code: ``OpenAIJudge`` tells it what the endpoint answered.
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from ragmon.judge.metrics import JudgeMetrics
from ragmon.telemetry import Telemetry

#: share of the measured send rate kept after a 429 (Netflix concurrency-limits' AIMD backs off to 0.9 too)
DECREASE = 0.9
#: additive increase per second, as a share of the rate at the last decrease: back to it in ~10 s
INCREASE_PER_SECOND = 0.01
#: the adaptive rate never drops below this (requests per second): a limit of 0 would never learn again
MIN_RATE = 0.05
#: seconds of sends over which the actual request rate is measured when a 429 arrives
RATE_WINDOW_SECONDS = 5.0
#: concurrency an adaptive limit starts at (the old fixed default: safe for an endpoint that queues)
INITIAL_CONCURRENCY = 8
#: answers the short and the long latency averages span (exponential, ≈ their window)
SHORT_ANSWERS, LONG_ANSWERS = 10, 500
#: latency up to this factor of the long-run average is not queueing (jitter, a slow tail): no decrease
LATENCY_TOLERANCE = 1.5
#: an answer slower than that raises the baseline by 1/this instead of entering it: queued answers do not
#: teach the limit that queueing is normal, while an endpoint that became slower for good is followed in time
BASELINE_CREEP_ANSWERS = 2000
#: the share of each new estimate taken into the concurrency limit
CONCURRENCY_SMOOTHING = 0.2
#: characters per prompt token assumed before the endpoint says (English averages ~4; 3 errs on the high side,
#: so token buckets and budget reservations are not exceeded by an unexpectedly dense prompt)
CHARS_PER_TOKEN = 3


def estimate_tokens(messages: list[dict[str, str]]) -> int:
    """Prompt tokens a chat request may count for, before the endpoint says (a few of framing per message)."""
    return sum(len(m["content"]) // CHARS_PER_TOKEN + 8 for m in messages)


class TokenBucket:
    """``per_minute`` units a minute, refilled continuously, at most one second's worth banked."""

    def __init__(self, per_minute: float, now: float):
        if not per_minute > 0:
            raise ValueError(f"per_minute must be > 0, got {per_minute!r}")
        self.per_second = per_minute / 60.0
        self.capacity = max(1.0, self.per_second)
        self.level = self.capacity
        self._at = now

    def set_rate(self, per_second: float, now: float) -> None:
        self._refill(now)
        self.per_second = per_second
        self.capacity = max(1.0, per_second)
        self.level = min(self.level, self.capacity)

    def wait(self, amount: float, now: float) -> float:
        """Seconds until ``amount`` may be taken (0: now). A request above the capacity waits for a full bucket."""
        self._refill(now)
        need = min(amount, self.capacity)
        # a hair of tolerance: a wait computed from floats may land a rounding error short of the amount
        return 0.0 if self.level >= need - 1e-9 else (need - self.level) / self.per_second

    def take(self, amount: float, now: float) -> None:
        self._refill(now)
        self.level -= amount

    def give(self, amount: float) -> None:
        """Return units taken for a request that did not use them (``amount`` < 0 takes more)."""
        self.level = min(self.capacity, self.level + amount)

    def _refill(self, now: float) -> None:
        if now > self._at:
            self.level = min(self.capacity, self.level + (now - self._at) * self.per_second)
        self._at = max(self._at, now)


class AdaptiveRate:
    """AIMD on the request rate (requests per second); ``limit`` None until the provider first says 429."""

    def __init__(self, ceiling: float | None):
        self.ceiling = ceiling
        self.limit: float | None = None
        self._learnt = 0.0  # the limit right after the last decrease: the increase is a share of it
        self._cut_at = float("-inf")
        self._grown_at = float("-inf")
        self._sends: deque[float] = deque()

    def sent(self, now: float) -> None:
        self._sends.append(now)
        while self._sends and self._sends[0] < now - RATE_WINDOW_SECONDS:
            self._sends.popleft()

    def overloaded(self, sent_at: float, now: float) -> bool:
        """A 429 for a request sent at ``sent_at``. Returns True when it cut the limit."""
        if sent_at <= self._cut_at:
            return False  # sent at the old rate: the cut already answered it
        # at least a second: a burst of the first few calls is not a rate
        window = max(1.0, min(RATE_WINDOW_SECONDS, now - self._sends[0])) if self._sends else 1.0
        measured = len(self._sends) / window
        base = measured if self.limit is None else min(self.limit, measured)
        self.limit = max(MIN_RATE, DECREASE * base)
        self._learnt = self.limit
        self._cut_at = self._grown_at = now
        return True

    def succeeded(self, now: float, limited_at: float) -> None:
        """A call succeeded at ``now``; the limit last held a caller back at ``limited_at``.

        The limit grows only while it is what holds calls back (a caller waited on it within the last second):
        a limit that is never reached proves nothing about the provider, and growing it would only make the
        next burst overshoot."""
        if self.limit is None:
            return
        if limited_at < now - 1.0:
            self._grown_at = now
            return
        self.limit += INCREASE_PER_SECOND * self._learnt * min(1.0, now - self._grown_at)
        self._grown_at = now
        if self.ceiling is not None:
            self.limit = min(self.limit, self.ceiling)


class AdaptiveConcurrency:
    """The calls at once the endpoint serves without queueing them, learnt from its answers' latency (see the module
    docstring); ``allowed`` is the whole number in force. Not thread-safe: ``CallLimiter`` holds the lock."""

    def __init__(self, ceiling: int, initial: int = INITIAL_CONCURRENCY):
        if ceiling < 1:
            raise ValueError(f"ceiling must be at least 1, got {ceiling}")
        self.ceiling = ceiling
        self.limit = float(max(1, min(initial, ceiling)))
        self.short: float | None = None  # recent latency (s)
        self.long: float | None = None  # long-run latency (s): what the endpoint takes when not queueing

    @property
    def allowed(self) -> int:
        return max(1, int(self.limit))

    def answered(self, latency: float, saturated: bool) -> None:
        """One call answered after ``latency`` seconds; ``saturated``: callers waited for a slot just now (room
        that nobody used proves nothing, so the limit then grows only if they did)."""
        if not latency > 0 or not math.isfinite(latency):
            return
        if self.short is None or self.long is None:
            self.short = self.long = latency
        else:
            self.short += 2 / (SHORT_ANSWERS + 1) * (latency - self.short)
            if latency <= LATENCY_TOLERANCE * self.long:
                self.long += 2 / (LONG_ANSWERS + 1) * (latency - self.long)
            else:  # a queued answer does not move the baseline; a slower endpoint still moves it, slowly
                self.long *= 1 + 1 / BASELINE_CREEP_ANSWERS
            if self.long > 2 * self.short:  # the endpoint got much faster: let the baseline follow sooner
                self.long = 0.95 * self.long + 0.05 * self.short
        gradient = max(0.5, min(1.0, LATENCY_TOLERANCE * self.long / self.short))
        estimate = self.limit * gradient + math.sqrt(self.limit)
        if not saturated:
            estimate = min(estimate, self.limit)
        limit = (1 - CONCURRENCY_SMOOTHING) * self.limit + CONCURRENCY_SMOOTHING * estimate
        self.limit = max(1.0, min(float(self.ceiling), limit))


@dataclass(frozen=True, slots=True)
class Permit:
    """One request allowed out: when it was sent and the tokens reserved for it."""

    sent_at: float
    tokens: int


class CallLimiter:
    """Every HTTP attempt of a judge goes through ``acquire`` and comes back through ``release``.

    ``requests_per_minute``/``tokens_per_minute`` None: no client-side limit of that kind (the adaptive rate still
    applies once the provider answers 429). ``max_pause_seconds`` caps a ``Retry-After`` pause.
    """

    def __init__(self, *, requests_per_minute: float | None = None, tokens_per_minute: float | None = None,
                 max_pause_seconds: float = 20.0, max_in_flight: int | None = None, adaptive_concurrency: bool = True,
                 clock: Callable[[], float] = time.monotonic, telemetry: Telemetry | None = None):
        self._clock = clock
        #: the judge's metrics (in flight, limits, 429s), registered on ``telemetry`` if given
        self.metrics = telemetry.use(JudgeMetrics) if telemetry is not None else None
        now = clock()
        #: calls at once: learnt up to ``max_in_flight`` (adaptive), exactly it, or unlimited (None)
        self.concurrency = (AdaptiveConcurrency(max_in_flight) if max_in_flight and adaptive_concurrency
                            else None)
        self.max_in_flight = max_in_flight
        self._concurrency_limited_at = float("-inf")  # when a caller last waited for a slot
        self.configured_rate = requests_per_minute / 60.0 if requests_per_minute else None
        self.adaptive = AdaptiveRate(self.configured_rate)
        self._requests = TokenBucket(requests_per_minute, now) if requests_per_minute else None
        self._tokens = TokenBucket(tokens_per_minute, now) if tokens_per_minute else None
        self.max_pause_seconds = max_pause_seconds
        self._paused_until = float("-inf")
        self._limited_at = float("-inf")  # when the request rate last held a caller back
        self._lock = threading.Condition()
        self._waiting: deque[object] = deque()  # callers of ``acquire`` in arrival order
        #: requests sent and not yet answered
        self.in_flight = 0
        #: requests let out, and 429 answers seen
        self.sent = 0
        self.overloads = 0

    @property
    def waiting(self) -> int:
        """Callers blocked in ``acquire``."""
        with self._lock:
            return len(self._waiting)

    @property
    def concurrency_limit(self) -> int | None:
        """Calls allowed at once now: the adaptive limit, or ``max_in_flight`` when fixed (None: no limit)."""
        return self.concurrency.allowed if self.concurrency is not None else self.max_in_flight

    @property
    def limit(self) -> float | None:
        """The request rate (per second) in force: the smaller of the configured and the adaptive one."""
        rates = [r for r in (self.configured_rate, self.adaptive.limit) if r is not None]
        return min(rates) if rates else None

    def try_acquire(self, tokens: int) -> Permit | float:
        """A permit now, or the seconds to wait before asking again."""
        with self._lock:
            return self._try(tokens, self._clock())

    def acquire(self, tokens: int, timeout: float | None = None) -> Permit | None:
        """Block until a request may go out, first come first served; None when ``timeout`` seconds pass first.

        Callers queue: only the oldest one asks the buckets, so under a tight limit every call waits about as long
        as the others instead of a few unlucky threads losing every race (at 64 calls in flight against 600
        requests a minute, the slowest trace waited five times the median before this queue)."""
        started = self._clock()
        deadline = None if timeout is None else started + timeout
        turn = object()
        with self._lock:
            self._waiting.append(turn)
            try:
                while True:
                    now = self._clock()
                    got = self._try(tokens, now) if self._waiting[0] is turn else None
                    if isinstance(got, Permit):
                        if self.metrics is not None:
                            self.metrics.judge_queue_wait.labels("rate_limit").observe(now - started)
                            self.metrics.judge_in_flight.inc()
                        return got
                    if deadline is not None and now + (got or 0.0) > deadline:
                        return None
                    wait = got if deadline is None else min(got or deadline - now, deadline - now)
                    self._lock.wait(wait)
            finally:
                self._waiting.remove(turn)
                self._lock.notify_all()  # the next in line may go (or re-check its place)

    def release(self, permit: Permit, *, status: int | None, retry_after: float | None = None,
                tokens_used: int | None = None) -> None:
        """What became of the request: HTTP ``status`` (None: no answer), ``Retry-After``, tokens it really used."""
        with self._lock:
            now = self._clock()
            self.in_flight -= 1
            if self._tokens is not None:
                if status == 429:
                    self._tokens.give(permit.tokens)  # refused before any work
                elif tokens_used is not None:
                    self._tokens.give(permit.tokens - tokens_used)
            cut = False
            if status == 429:
                self.overloads += 1
                cut = self.adaptive.overloaded(permit.sent_at, now)
            elif status is not None and status < 400:
                self.adaptive.succeeded(now, self._limited_at)
                if self.concurrency is not None:
                    self.concurrency.answered(now - permit.sent_at, now - self._concurrency_limited_at <= 1.0)
            rate = self.limit
            if rate is not None:
                if self._requests is None:
                    self._requests = TokenBucket(rate * 60.0, now)
                elif rate != self._requests.per_second:
                    self._requests.set_rate(rate, now)
                if cut:  # the provider's bucket is empty: a full one here would overshoot again at once
                    self._requests.level = min(self._requests.level, 0.0)
            if retry_after is not None and status in (429, 503):
                self._paused_until = max(self._paused_until, now + min(retry_after, self.max_pause_seconds))
            self._lock.notify_all()
        if self.metrics is not None:
            self.metrics.judge_in_flight.dec()
            self.metrics.judge_adaptive_limit.set(math.inf if rate is None else rate)
            allowed = self.concurrency_limit
            self.metrics.judge_concurrency_limit.set(math.inf if allowed is None else allowed)
            if status == 429:
                self.metrics.judge_rate_limited.inc()

    def _try(self, tokens: int, now: float) -> Permit | float:
        if now < self._paused_until:
            return self._paused_until - now
        allowed = self.concurrency_limit
        if allowed is not None and self.in_flight >= allowed:
            self._concurrency_limited_at = now
            return 0.05  # a release wakes the waiters at once (``release`` notifies them); this bounds a deadline
        rate_wait = self._requests.wait(1, now) if self._requests is not None else 0.0
        token_wait = self._tokens.wait(tokens, now) if self._tokens is not None else 0.0
        if rate_wait > 0 or token_wait > 0:
            if rate_wait >= token_wait:
                self._limited_at = now
            return max(rate_wait, token_wait)
        if self._requests is not None:
            self._requests.take(1, now)
        if self._tokens is not None:
            self._tokens.take(tokens, now)
        self.adaptive.sent(now)
        self.in_flight += 1
        self.sent += 1
        return Permit(now, tokens)
