"""Every metric set of ragmon, and the series names its metrics can expose, for the tests that check the catalogue
against the sets and alert rules and dashboards against the names: each family's name, a counter's ``_total``, an
info's ``_info`` and a histogram's parts."""

from __future__ import annotations

import importlib
import inspect
from pathlib import Path

from ragmon.telemetry import MetricSet, ProcessMetrics, Telemetry

ROOT = Path(__file__).resolve().parents[2]
_SUFFIXES = {"counter": ("_total",), "info": ("_info",), "histogram": ("_bucket", "_sum", "_count")}


def metric_sets() -> list[type[MetricSet]]:
    """The ``MetricSet`` classes declared in ragmon: ``ProcessMetrics``, and those of every ``metrics.py`` module
    (``ragmon/<part>/metrics.py``), each where it is defined (not where it is imported)."""
    found: list[type[MetricSet]] = [ProcessMetrics]
    for path in sorted((ROOT / "ragmon").rglob("metrics.py")):
        name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        module = importlib.import_module(name)
        found += [cls for _, cls in inspect.getmembers(module, inspect.isclass)
                  if issubclass(cls, MetricSet) and cls is not MetricSet and cls.__module__ == name]
    return found


def every_metric() -> Telemetry:
    """A telemetry with every set registered: what a process running every part would expose."""
    telemetry = Telemetry()
    for kind in metric_sets():
        telemetry.use(kind)
    return telemetry


def exported_metric_names() -> set[str]:
    names: set[str] = set()
    for family in every_metric().registry.collect():
        names.add(family.name)
        names.update(f"{family.name}{suffix}" for suffix in _SUFFIXES.get(family.type, ()))
    return names
