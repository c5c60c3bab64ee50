"""Consumer lag on /metrics: one gauge series per assigned partition, none for a partition given away.

Owns ``ragmon_ingest_consumer_lag_messages`` and the ``assigned`` / ``caught_up`` tests that ``--exit-when-idle``
uses (through each consumer's ``ConsumerState``: the ingest and outcome loops and the score loop read their lag
here, the score loop without a gauge). Lag is read from the source (``lag()``, ``assignment()``: no extra broker
request) at most every ``interval_seconds``; the series of a partition this replica no longer owns is removed,
since a frozen value left behind after a rebalance would win ``max by (topic, partition)`` in the alert rules and
page for a drained partition. It must not poll, commit or pause, and a failing reading never stops the loop.
"""

from __future__ import annotations

import logging
from typing import Any, Protocol

from ragmon.stream.source import Partition

log = logging.getLogger(__name__)


class LagSource(Protocol):
    """The part of ``TraceSource`` lag reporting reads."""

    def lag(self) -> dict[Partition, int]: ...

    def assignment(self) -> set[Partition]: ...


class LagReporter:
    """Consumer-lag gauges of one consumer. Called from the loop thread; ``caught_up`` from any thread."""

    def __init__(self, source: LagSource, gauge: Any = None, *, interval_seconds: float = 2.0):
        self._source = source
        self._gauge = gauge                        # ragmon_ingest_consumer_lag_messages{topic, partition}, or None
        self.interval_seconds = interval_seconds
        self.last: dict[Partition, int] = {}       #: the last reading, {partition: messages behind}
        self._assigned = False                     # partitions were assigned at the last reading
        self._complete = False                     # the last reading covered every assigned partition
        self._series: set[Partition] = set()       # partitions with a series on /metrics
        self._next = float("-inf")

    def maybe_update(self, now: float) -> None:
        """Read the lag if ``interval_seconds`` passed since the last reading (the loop calls this every step)."""
        if now >= self._next:
            self._next = now + self.interval_seconds
            self.update()

    def update(self) -> None:
        try:
            self.last = self._source.lag()
            assigned = self._source.assignment()
            self._assigned = bool(assigned)
            self._complete = set(self.last) == assigned
            if self._gauge is None:
                return
            for (topic, part), lag in self.last.items():
                self._gauge.labels(topic, str(part)).set(lag)
                self._series.add((topic, part))
            self.drop(self._series - assigned)
        except Exception as exc:  # noqa: BLE001 - a metric must never stop the loop
            log.debug("lag update failed: %s", exc)

    def drop(self, parts: set[Partition]) -> None:
        """Stop exporting the lag of ``parts`` (revoked, or gone from the assignment)."""
        if self._gauge is None:
            return
        for topic, part in parts & self._series:
            self._gauge.remove(topic, str(part))
            self._series.discard((topic, part))

    def assigned(self) -> bool:
        """Partitions were assigned at the last reading."""
        return self._assigned

    def caught_up(self) -> bool:
        """Partitions are assigned and the last reading was zero on each of them."""
        return self._complete and bool(self.last) and not any(self.last.values())
