"""The series names ragmon's metrics can expose, for the tests that check alert rules and dashboards name only
those: each family's name, a counter's ``_total``, an info's ``_info`` and a histogram's parts."""

from __future__ import annotations

from ragmon.telemetry import Telemetry

_SUFFIXES = {"counter": ("_total",), "info": ("_info",), "histogram": ("_bucket", "_sum", "_count")}


def exported_metric_names() -> set[str]:
    names: set[str] = set()
    for family in Telemetry().registry.collect():
        names.add(family.name)
        names.update(f"{family.name}{suffix}" for suffix in _SUFFIXES.get(family.type, ()))
    return names
