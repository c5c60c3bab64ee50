"""Running drift checks on a schedule: the ``drift`` daemon role.

``DriftRole.run(stop)`` runs a check at start and then every ``interval_seconds`` (measured on the injected
clock, waited for with the injected ``wait`` so tests drive time by hand). A failing check is logged and
counted (``ragmon_drift_checks_total{outcome="error"}``) and retried at the next slot; it never ends the loop.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from ragmon.drift.check import DriftChecker
from ragmon.drift.result import CheckResult

log = logging.getLogger("ragmon.drift")

#: wait(stop, seconds) -> True when stop was set during the wait
Wait = Callable[[threading.Event, float], bool]


def _event_wait(stop: threading.Event, seconds: float) -> bool:
    return stop.wait(max(0.0, seconds))


@dataclass
class DriftRole:
    """The drift role of a daemon: one checker, one schedule."""

    checker: DriftChecker
    interval_seconds: float
    wait: Wait = _event_wait
    on_result: Callable[[CheckResult], None] | None = None
    name: str = "drift"
    last_attempt: datetime | None = field(default=None, init=False)
    last_success: datetime | None = field(default=None, init=False)
    last_error: str | None = field(default=None, init=False)
    checks_run: int = field(default=0, init=False)

    def run_due(self) -> CheckResult | None:
        """Run one check now; errors are recorded, never raised."""
        self.last_attempt = self.checker.clock()
        self.checks_run += 1
        try:
            result = self.checker.run_once()
        except Exception as exc:  # noqa: BLE001 - the next slot retries; the loop must survive
            self.last_error = f"{type(exc).__name__}: {exc}"
            log.error("drift check failed (next attempt in %.0fs): %s", self.interval_seconds, self.last_error)
            return None
        self.last_success, self.last_error = result.checked_at, None
        log.info("drift check %s: %d tests, %d drifted, %.2fs", result.check_id[:12], len(result.results),
                 len(result.drifted), result.duration_seconds)
        if self.on_result is not None:
            self.on_result(result)
        return result

    def run(self, stop: threading.Event) -> None:
        due = self.checker.clock()
        if self.checker.telemetry is not None:
            # a role that never completes a check still alerts (RagmonDriftCheckStale), and a process without the
            # drift role keeps 0, which the rule ignores
            self.checker.telemetry.drift_last_check.set(due.timestamp())
        while not stop.is_set():
            now = self.checker.clock()
            if now >= due:
                self.run_due()
                due = now + timedelta(seconds=self.interval_seconds)
                continue
            if self.wait(stop, (due - now).total_seconds()):
                return

    def liveness(self) -> tuple[bool, str]:
        """Alive while the last attempt is at most two intervals old (plus a minute for a slow check)."""
        if self.last_attempt is None:
            return True, "no check attempted yet"
        age = (self.checker.clock() - self.last_attempt).total_seconds()
        return age <= 2 * self.interval_seconds + 60, f"last drift check attempt {age:.0f}s ago"
