"""The metric catalogue is the one place a metric is named: each owner's metric set holds exactly its entries (and a
process registers a set only when a part of it is used), each entry is moved by some code, names follow Prometheus
conventions, and ``docs/metrics.md`` is rendered from it."""

from __future__ import annotations

import dataclasses
import re
from collections import Counter
from pathlib import Path
from typing import ClassVar, get_type_hints

import pytest
from prometheus_client import CollectorRegistry, Gauge, Histogram, Info
from prometheus_client import Counter as PromCounter

from ragmon.drift.metrics import DriftMetrics
from ragmon.telemetry import (
    CATALOGUE,
    SNAPSHOTS,
    GaugeSnapshot,
    GaugeSpec,
    MetricSet,
    Telemetry,
    owner_fields,
    register_set,
)
from ragmon.telemetry.reference import _OWNERS, DOC, render
from tests.support.metric_names import every_metric, metric_sets

ROOT = Path(__file__).resolve().parents[3]
#: label names that would make a series per trace, user or question (unbounded)
#: the type of a set's field for each kind of entry
_TYPES = {"counter": PromCounter, "gauge": Gauge, "histogram": Histogram, "info": Info, "series": GaugeSpec}
UNBOUNDED = {"trace_id", "query_id", "user", "user_id", "question", "session_id", "chunk_id", "text"}


def test_attributes_and_names_are_unique_and_follow_prometheus_conventions():
    assert [a for a, n in Counter(s.attr for s in CATALOGUE).items() if n > 1] == []
    assert [a for a, n in Counter(s.name for s in CATALOGUE).items() if n > 1] == []
    for s in CATALOGUE:
        assert re.fullmatch(r"ragmon_[a-z0-9_]+", s.name), s.name
        assert (s.kind == "counter") == s.name.endswith("_total"), f"{s.name}: counters, and only they, end in _total"
        assert not set(s.labels) & UNBOUNDED, f"{s.name}: unbounded label"
        assert s.help.endswith((".", ")")) and len(s.help) > 10, f"{s.name}: HELP says what it counts"
        assert s.owner in _OWNERS, f"{s.name}: owner {s.owner!r} has no section in docs/metrics.md"


def test_every_owner_has_one_set_whose_fields_are_its_entries_and_nothing_else():
    sets = metric_sets()
    by_owner = Counter(kind.owner for kind in sets)
    assert {o for o, n in by_owner.items() if n > 1} == set(), "one set per owner"
    assert set(by_owner) == {s.owner for s in CATALOGUE}, "every owner of the catalogue has its set, and only they"
    kinds = {s.attr: _TYPES[s.kind] for s in CATALOGUE} | dict.fromkeys(SNAPSHOTS, GaugeSnapshot)
    for kind in sets:
        hints = get_type_hints(kind)
        fields = {f.name: hints[f.name] for f in dataclasses.fields(kind)}
        assert sorted(fields) == sorted(owner_fields(kind.owner)), f"{kind.__name__}: fields = owner {kind.owner}'s"
        assert {f: t for f, t in fields.items() if kinds[f] is not t} == {}, f"{kind.__name__}: field types"
    members = [m for ms in SNAPSHOTS.values() for m in ms]
    series = {s.attr for s in CATALOGUE if s.kind == "series"}
    assert sorted(members) == sorted(series), "every labelled series family is served by exactly one snapshot"
    owner = {s.attr: s.owner for s in CATALOGUE}
    assert [a for a, ms in SNAPSHOTS.items() if len({owner[m] for m in ms}) != 1] == [], "a snapshot has one owner"


def test_every_set_registered_exposes_the_catalogue_and_nothing_else():
    families = {f.name for f in every_metric().registry.collect()}
    assert families == {s.name.removesuffix("_total") for s in CATALOGUE}


def test_a_process_starts_with_its_own_metrics_and_registers_a_set_once_when_first_used():
    t = Telemetry()
    assert t.owners == ["process"]
    assert {f.name for f in t.registry.collect()} == {"ragmon_build", "ragmon_links"}
    drift = t.use(DriftMetrics)
    assert t.use(DriftMetrics) is drift and t.owners == ["process", "drift"]
    names = {f.name for f in t.registry.collect()}
    assert names == {"ragmon_build", "ragmon_links"} | {s.name.removesuffix("_total") for s in CATALOGUE
                                                       if s.owner == "drift"}


def test_a_set_that_differs_from_its_owners_entries_is_refused_before_anything_is_registered():
    @dataclasses.dataclass(frozen=True)
    class Short(MetricSet):
        owner: ClassVar[str] = "shadow"
        shadow_runs: object

    registry = CollectorRegistry()
    with pytest.raises(TypeError, match="shadow_pairs"):
        register_set(Short, registry)
    assert list(registry.collect()) == []

    @dataclasses.dataclass(frozen=True)
    class Other(MetricSet):  # a second set of an owner registered already
        owner: ClassVar[str] = "process"
        build_info: object
        links_info: object

    with pytest.raises(TypeError, match="expected a Other, got a ProcessMetrics"):
        Telemetry().use(Other)


def test_every_metric_is_moved_by_some_code():
    code = "\n".join(p.read_text(encoding="utf-8") for p in (ROOT / "ragmon").rglob("*.py")
                     if p.name != "catalogue.py")
    unused = [s.attr for s in CATALOGUE if s.kind != "series" and not re.search(rf"\.{s.attr}\b", code)]
    unused += [a for a in SNAPSHOTS if not re.search(rf"\.{a}\b", code)]
    assert unused == [], "metrics no code moves: remove them from the catalogue"


def test_docs_metrics_is_rendered_from_the_catalogue():
    assert DOC.read_text(encoding="utf-8") == render(), "run: python3 -m ragmon.telemetry.reference --write"
