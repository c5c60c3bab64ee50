"""The metric objects of one ragmon process, made from the catalogue (``ragmon.telemetry.catalogue``) one owner at a
time and registered on a ``CollectorRegistry`` passed in (a fresh one per test), never on the global default
registry, so two pipelines in one test never share counters. Owns no names or HELP texts: the catalogue does.

A *metric set* is one owner's metrics as a frozen dataclass (a ``MetricSet`` with ``owner``), declared next to the
code that moves them (``ragmon/<part>/metrics.py``); its fields are exactly the catalogue's entries of that owner
and the snapshots serving them (``register_set`` refuses a set that differs). ``Telemetry`` is the process's
registry and the sets registered on it so far: the part that moves a set asks for it when it is built
(``telemetry.use(DriftMetrics)``), which registers it the first time and returns the same set after, so a process
exposes the metrics of the parts it runs and no others, and two parts of one process (the ingest and otlp roles'
loops) share one set. ``ProcessMetrics`` is registered by every ``Telemetry``.
"""

from __future__ import annotations

import dataclasses
import threading
from typing import ClassVar, TypeVar

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Info

from ragmon import __version__
from ragmon.telemetry.catalogue import CATALOGUE, SNAPSHOTS, MetricDef
from ragmon.telemetry.snapshot import GaugeSnapshot, GaugeSpec

_MAKERS = {"counter": Counter, "gauge": Gauge, "histogram": Histogram, "info": Info}


class MetricSet:
    """Base of one owner's metrics: a frozen dataclass whose fields are the catalogue's entries of ``owner``."""

    owner: ClassVar[str]


S = TypeVar("S", bound=MetricSet)


def owner_fields(owner: str) -> list[str]:
    """The fields a set of ``owner`` holds, in catalogue order: its entries, then the snapshots that serve them."""
    attrs = [s.attr for s in CATALOGUE if s.owner == owner]
    return attrs + [name for name, members in SNAPSHOTS.items() if members[0] in attrs]


def _make(spec: MetricDef, registry: CollectorRegistry) -> object:
    if spec.kind == "series":
        return GaugeSpec(spec.name, spec.help, spec.labels)
    extra = {"buckets": spec.buckets} if spec.buckets is not None else {}
    return _MAKERS[spec.kind](spec.name, spec.help, spec.labels, registry=registry, **extra)


def register_set(kind: type[S], registry: CollectorRegistry) -> S:
    """Make every metric of ``kind.owner`` from the catalogue, register it on ``registry`` and return the set.
    ``TypeError`` (before anything is registered) when the set's fields are not exactly its owner's entries."""
    expected = owner_fields(kind.owner)
    declared = [f.name for f in dataclasses.fields(kind)]  # type: ignore[arg-type]
    if sorted(declared) != sorted(expected):
        raise TypeError(f"{kind.__name__}: expected the fields of owner {kind.owner!r} in the catalogue "
                        f"{sorted(expected)}, got {sorted(declared)}")
    made: dict[str, object] = {s.attr: _make(s, registry) for s in CATALOGUE if s.owner == kind.owner}
    for name, members in SNAPSHOTS.items():
        if members[0] in made:
            snapshot = GaugeSnapshot(*(made[m] for m in members))  # type: ignore[arg-type]
            registry.register(snapshot)
            made[name] = snapshot
    return kind(**made)


@dataclasses.dataclass(frozen=True, slots=True)
class ProcessMetrics(MetricSet):
    """What every process exposes, whatever its roles: its build and where the alerts' links point."""

    owner: ClassVar[str] = "process"
    build_info: Info
    links_info: Info


class Telemetry:
    """A process's registry and the metric sets registered on it so far (``use``); ``process`` is always there."""

    def __init__(self, registry: CollectorRegistry | None = None):
        self.registry = registry if registry is not None else CollectorRegistry()
        self._sets: dict[str, MetricSet] = {}
        self._lock = threading.Lock()
        self.process = self.use(ProcessMetrics)
        self.process.build_info.info({"version": __version__})

    def use(self, kind: type[S]) -> S:
        """The process's set of ``kind``, registered on the registry the first time it is asked for. Thread-safe.
        ``TypeError`` when another set of the same owner was registered."""
        with self._lock:
            found = self._sets.get(kind.owner)
            if found is None:
                found = self._sets[kind.owner] = register_set(kind, self.registry)
        if not isinstance(found, kind):
            raise TypeError(f"owner {kind.owner!r}: expected a {kind.__name__}, got a {type(found).__name__} "
                            "registered already")
        return found

    @property
    def owners(self) -> list[str]:
        """The owners whose sets are registered, in the order they were (``process`` first)."""
        with self._lock:
            return list(self._sets)

    def counter_totals(self, *prefixes: str) -> dict[str, float]:
        """The current value of every counter whose name starts with one of ``prefixes``, one entry per labelled
        series, keyed as Prometheus prints it (``ragmon_ingest_dead_letters_total{reason="schema"}``): what a
        process reports when it stops, since its counters die with it."""
        totals = {}
        for family in self.registry.collect():
            if family.type != "counter" or not family.name.startswith(prefixes):
                continue
            for sample in family.samples:
                if sample.name.endswith("_total"):
                    labels = ",".join(f'{k}="{v}"' for k, v in sorted(sample.labels.items()))
                    totals[sample.name + (f"{{{labels}}}" if labels else "")] = sample.value
        return totals
