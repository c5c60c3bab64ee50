"""``--exit-when-idle N``: stop a consumer process once its loop has been idle for N seconds, or once it has gone
too long without a partition.

Owns the one rule that ``ragmon ingest`` (traces, and ``--outcomes``) and ``ragmon score`` apply. Idle means,
without a break for N seconds, as the loop's own thread last published it (``ConsumerState``): partitions
assigned, the lag zero on each at the last reading, nothing read, nothing buffered, judging, in flight or waiting
for a retry, and every offset read committed. Time without a message alone is not idle: a consumer that joins its
group while a killed member still holds the partitions (until the broker's session timeout) reads nothing because
it owns nothing yet. A consumer without a partition for ``unassigned_limit_seconds`` (the commands pass twice
``kafka.session_timeout_ms``: a dead member's partitions come back within one session timeout) is stopped too, and
``gave_up_after`` says so, so that the command can exit non-zero instead of claiming it finished.

``IdleRule`` is the rule alone (states and times in, a verdict out; tested without a clock); ``IdleWatch`` runs it
in a thread against a ``Process``; ``watch_idle`` starts one as the commands do and ``exit_if_never_assigned``
turns its giving up into exit 3. It must not touch a loop's own state: it reads ``consumer_state`` only.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from ragmon.cli.common import EXIT_UNAVAILABLE, fail
from ragmon.daemon import ConsumerState

if TYPE_CHECKING:
    from ragmon.config import Settings
    from ragmon.process import Process

#: how often the watch reads the loop's state
WATCH_EVERY_SECONDS = 0.2

Verdict = Literal["idle", "unassigned"]


@dataclass
class IdleRule:
    """When a consumer counts as done (``"idle"``) or as never getting to work (``"unassigned"``)."""

    idle_seconds: float
    unassigned_limit_seconds: float
    _last: ConsumerState | None = field(default=None, init=False)
    _busy_at: float | None = field(default=None, init=False)      # last time it was not idle
    _unassigned_since: float | None = field(default=None, init=False)

    def observe(self, state: ConsumerState, now: float) -> Verdict | None:
        """The verdict after this reading (None: keep watching)."""
        if state.assigned:
            self._unassigned_since = None
        elif self._unassigned_since is None:
            self._unassigned_since = now
        working = (not (state.settled and state.caught_up)
                   or (self._last is not None and state.consumed != self._last.consumed))
        self._last = state
        if working or self._busy_at is None:
            self._busy_at = now
        if self._unassigned_since is not None and now - self._unassigned_since >= self.unassigned_limit_seconds:
            return "unassigned"
        if not working and now - self._busy_at >= self.idle_seconds:
            return "idle"
        return None


class IdleWatch:
    """Watches ``process``'s ``role`` in a daemon thread and stops the process on a verdict (``start``)."""

    def __init__(self, process: Process, role: str, idle_seconds: float, *, unassigned_limit_seconds: float,
                 clock: Callable[[], float] = time.monotonic):
        self._process, self._role, self._clock = process, role, clock
        self.rule = IdleRule(idle_seconds, unassigned_limit_seconds)
        #: set when the watch stopped the process because no partition was assigned for that many seconds
        self.gave_up_after: float | None = None

    def start(self) -> IdleWatch:
        threading.Thread(target=self._watch, name="ragmon-idle-watch", daemon=True).start()
        return self

    def _watch(self) -> None:
        service = self._process.service(self._role)
        while not self._process.wait_for_stop(WATCH_EVERY_SECONDS):
            verdict = self.rule.observe(service.consumer_state, self._clock())
            if verdict == "unassigned":
                self.gave_up_after = self.rule.unassigned_limit_seconds
            if verdict is not None:
                self._process.stop()
                return


def watch_idle(process: Process, role: str, seconds: float, settings: Settings) -> IdleWatch:
    """Start the ``--exit-when-idle`` watch of ``process``'s ``role`` (a consumer of ``settings.kafka``'s broker)."""
    return IdleWatch(process, role, seconds,
                     unassigned_limit_seconds=2 * settings.kafka.session_timeout_ms / 1000).start()


def exit_if_never_assigned(watch: IdleWatch | None, topic: str, group: str) -> None:
    """Exit 3 when the watch stopped the process because it got no partition: never claim the work is done."""
    if watch is not None and watch.gave_up_after is not None:
        raise fail(f"stopped without finishing: no partition of {topic} was assigned to this member of group {group} "
                   f"for {watch.gave_up_after:g}s (twice kafka.session_timeout_ms): another member holds them all (or "
                   "one that stopped polling keeps the group rebalancing), or the topic does not exist; what it read "
                   "before is committed — run it again once the group can assign it partitions", EXIT_UNAVAILABLE)
