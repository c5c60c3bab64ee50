"""The one timing rule every benchmark here uses: the best wall-clock time of several runs."""

from __future__ import annotations

import time
from collections.abc import Callable


def best_of(rounds: int, fn: Callable[[], object]) -> float:
    """The fewest seconds ``fn()`` took over ``rounds`` calls (the least disturbed by other load)."""
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best
