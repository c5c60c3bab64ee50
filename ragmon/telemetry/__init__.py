"""Every ``ragmon_*`` Prometheus metric: the catalogue as data (``catalogue``), the metric sets made from it one owner
at a time and a process's registry holding the sets it uses (``instruments``), and gauge families published as a
whole (``snapshot``)."""

from ragmon.telemetry.catalogue import CATALOGUE, SNAPSHOTS, MetricDef
from ragmon.telemetry.instruments import MetricSet, ProcessMetrics, Telemetry, owner_fields, register_set
from ragmon.telemetry.snapshot import GaugeSnapshot, GaugeSpec, Series

__all__ = ["CATALOGUE", "SNAPSHOTS", "GaugeSnapshot", "GaugeSpec", "MetricDef", "MetricSet", "ProcessMetrics", "Series",
           "Telemetry", "owner_fields", "register_set"]
