"""The ``ragmon_*`` metrics of the embedded store's disk and parts (``write_guard.WriteGuard``), as a metric set made
from the catalogue (``ragmon.telemetry.catalogue``, owner ``store``). Registered when a process attaches the embedded
store's write guard to its telemetry (every process on the embedded store); a ClickHouse server has none. Owns
no names or HELP texts."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from prometheus_client import Counter, Gauge

from ragmon.telemetry import MetricSet


@dataclass(frozen=True, slots=True)
class StoreMetrics(MetricSet):
    """The embedded store's disk and part metrics (owner ``store``)."""

    owner: ClassVar[str] = "store"
    store_disk_free: Gauge
    store_writes_paused: Gauge
    store_ignored_write_errors: Counter
    store_broken_parts: Counter
    store_rows_lost: Counter
    store_detached_broken_parts: Gauge
