"""Running drift checks on a schedule: the ``drift`` daemon role.

``DriftRole.run(stop)`` runs a check at start and then every ``interval_seconds`` (measured on the injected
clock, waited for with the injected ``wait`` so tests drive time by hand). A failing check is logged and
counted (``ragmon_drift_checks_total{outcome="error"}``) and retried at the next slot; it never ends the loop.
Between checks, with ``look_seconds``, it looks at the window in progress every ``look_seconds`` from the last
check on (``DriftChecker.look_once``, ``ragmon.drift.check.watch``); a missed slot is skipped, never run twice (a look
spends its slot's share of the budget); a failing look is logged and counted (``ragmon_drift_looks_total``).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from ragmon.drift.check.check import DriftChecker
from ragmon.drift.check.result import CheckResult

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
    look_seconds: float | None = None  # between checks, look at the window in progress this often (None: never)
    last_attempt: datetime | None = field(default=None, init=False)
    last_check: datetime | None = field(default=None, init=False)  # the last successful check: the window's start
    looks_run: int = field(default=0, init=False)
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
        self.last_check = result.checked_at
        log.info("drift check %s: %d tests, %d drifted, %.2fs", result.check_id[:12], len(result.results),
                 len(result.drifted), result.duration_seconds)
        if self.on_result is not None:
            self.on_result(result)
        return result

    def look_due(self) -> None:
        """Look at the window in progress since the last check; errors are logged and counted, never raised."""
        if self.last_check is None:
            return
        self.looks_run += 1
        try:
            result = self.checker.look_once(self.last_check)
        except Exception as exc:  # noqa: BLE001 - the next look or check retries; the loop must survive
            log.error("drift look failed: %s: %s", type(exc).__name__, exc)
            return
        for x in result.alarms:
            log.warning("drift watch: %s %s paged %.0fs into the window (z %.2f, boundary %.2f, %d traces)",
                        x.key, x.planned.test.name, x.elapsed_seconds, x.z, x.boundary_z, x.n)

    def run(self, stop: threading.Event) -> None:
        due = self.checker.clock()
        look: datetime | None = None
        if self.checker.metrics is not None:
            # a role that never completes a check still alerts (RagmonDriftCheckStale); a process without the drift
            # role does not have the gauge (the rule also ignores 0: a checker built and never run)
            self.checker.metrics.drift_last_check.set(due.timestamp())
        while not stop.is_set():
            now = self.checker.clock()
            if now >= due:
                self.run_due()
                due = now + timedelta(seconds=self.interval_seconds)
                look = (self.last_check + timedelta(seconds=self.look_seconds)
                        if self.look_seconds and self.last_check is not None else None)
                continue
            if look is not None and look < due and now >= look:
                self.look_due()
                step = timedelta(seconds=self.look_seconds or 0)
                while look <= now:  # a slot missed while looking (or asleep) is skipped, not run late twice
                    look += step
                continue
            wake = min(due, look) if look is not None and look < due else due
            if self.wait(stop, (wake - now).total_seconds()):
                return

    def liveness(self) -> tuple[bool, str]:
        """Alive while the last attempt is at most two intervals old (plus a minute for a slow check)."""
        if self.last_attempt is None:
            return True, "no check attempted yet"
        age = (self.checker.clock() - self.last_attempt).total_seconds()
        return age <= 2 * self.interval_seconds + 60, f"last drift check attempt {age:.0f}s ago"
