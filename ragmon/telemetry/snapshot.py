"""Gauge families published as a whole: a ``GaugeSpec`` names one (name, HELP, label names), a ``GaugeSnapshot``
serves the series of several as one collector whose every publish replaces them all. Owns no metric names: the
catalogue (``ragmon.telemetry.catalogue``) does."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

#: one published set of series: for each gauge, label values (in the gauge's label order) → value
Series = Mapping["GaugeSpec", Mapping[tuple[str, ...], float]]


@dataclass(frozen=True, slots=True)
class GaugeSpec:
    """A labelled gauge family whose series come from a ``GaugeSnapshot``: its name, HELP text and label names."""

    name: str
    documentation: str
    labels: tuple[str, ...]


class GaugeSnapshot(Collector):
    """Gauge families whose series are replaced all at once, as a collector registered like any metric.

    ``publish`` swaps in a whole new set of series: a series the last publish did not name is gone from the
    next scrape by construction (nothing to remove by hand), and a scrape sees either the old set or the new
    one, never a mix or a gap that would reset an alert's ``for`` timer. The swap is one reference assignment,
    so a scrape on the HTTP thread needs no lock.
    """

    def __init__(self, *specs: GaugeSpec):
        self._specs = specs
        self._series: Series = {}

    def publish(self, series: Series) -> None:
        """Replace every series; a gauge left out has none. ``ValueError`` if a key does not fit its gauge."""
        for spec, values in series.items():
            if spec not in self._specs:
                raise ValueError(f"expected one of {[s.name for s in self._specs]}, got gauge {spec.name}")
            for key in values:
                if len(key) != len(spec.labels):
                    raise ValueError(f"{spec.name}: expected values for {spec.labels}, got {key}")
        self._series = series

    def collect(self) -> Iterator[GaugeMetricFamily]:
        series = self._series
        for spec in self._specs:
            family = GaugeMetricFamily(spec.name, spec.documentation, labels=spec.labels)
            for key, value in series.get(spec, {}).items():
                family.add_metric(key, value)
            yield family

    def describe(self) -> Iterator[GaugeMetricFamily]:
        """The families without samples: lets the registry refuse a second metric of the same name."""
        for spec in self._specs:
            yield GaugeMetricFamily(spec.name, spec.documentation, labels=spec.labels)
