"""When to retry a failed batch: bounded exponential backoff with jitter, the longest delay for permanent errors.

Owns the retry schedule of the ingest loop's writes (STYLE.md, errors 3): the number of failed attempts, the
time the next attempt is due, and the delay rule. The clock and the random source are injected, so a test
drives it through ``failed`` / ``remaining`` / ``reset`` alone. It must not sleep or retry anything itself: the
loop keeps polling (paused) until ``remaining()`` reaches 0, so group membership survives and shutdown is not
held up by a wait.
"""

from __future__ import annotations

import random
from collections.abc import Callable

#: the delay before the first retry is about twice this (``FIRST_SECONDS * 2 ** attempts``, halved by jitter)
FIRST_SECONDS = 0.1
#: exponent cap: past it the delay is the ceiling anyway, and 2 ** attempts stays a small number
MAX_DOUBLINGS = 20


class Backoff:
    """The retry schedule of one failed write. Not thread-safe (the loop thread)."""

    __slots__ = ("ceiling_seconds", "_clock", "_rng", "attempts", "retry_at")

    def __init__(self, ceiling_seconds: float, *, clock: Callable[[], float], rng: random.Random):
        self.ceiling_seconds = ceiling_seconds
        self._clock = clock
        self._rng = rng
        self.attempts = 0       #: failed attempts since the last success (or reset)
        self.retry_at = 0.0     #: clock time the next attempt is due

    def failed(self, retryable: bool) -> float:
        """Count a failed attempt and schedule the next one; return its delay in seconds.

        A retryable error waits ``FIRST_SECONDS * 2 ** attempts`` capped at the ceiling, a permanent one (an
        error nobody classified included) the ceiling; either way with jitter: a uniform draw from the upper
        half of that wait, so replicas that failed together do not retry together.
        """
        self.attempts += 1
        ceiling = self.ceiling_seconds
        wait = min(ceiling, FIRST_SECONDS * 2 ** min(self.attempts, MAX_DOUBLINGS)) if retryable else ceiling
        delay = wait / 2 + self._rng.uniform(0, wait / 2)
        self.retry_at = self._clock() + delay
        return delay

    def remaining(self) -> float:
        """Seconds until the next attempt is due; 0 once it is."""
        return max(0.0, self.retry_at - self._clock())

    def reset(self) -> None:
        """A write succeeded (or the failed batch was dropped): the next failure starts from the shortest delay."""
        self.attempts = 0
        self.retry_at = 0.0
