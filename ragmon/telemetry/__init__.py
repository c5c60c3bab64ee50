"""Every ``ragmon_*`` Prometheus metric: the catalogue as data (``catalogue``), the metric objects of one process
(``instruments.Telemetry``) and gauge families published as a whole (``snapshot``)."""

from ragmon.telemetry.catalogue import CATALOGUE, SNAPSHOTS, MetricDef
from ragmon.telemetry.instruments import Telemetry
from ragmon.telemetry.snapshot import GaugeSnapshot, GaugeSpec, Series

__all__ = ["CATALOGUE", "SNAPSHOTS", "GaugeSnapshot", "GaugeSpec", "MetricDef", "Series", "Telemetry"]
