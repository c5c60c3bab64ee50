"""A clock for the periodic roles' loops in tests: it moves only when the loop waits."""

from __future__ import annotations

import threading
from datetime import datetime, timedelta


class ManualClock:
    """Called, the time now; ``wait(stop, seconds)`` records the wait and moves the time on by it."""

    def __init__(self, start: datetime):
        self.now = start
        self.waits: list[float] = []

    def __call__(self) -> datetime:
        return self.now

    def wait(self, stop: threading.Event, seconds: float) -> bool:
        self.waits.append(seconds)
        self.now += timedelta(seconds=seconds)
        return stop.is_set()
