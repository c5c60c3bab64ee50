"""The metric catalogue is the one place a metric is named: ``Telemetry`` makes exactly its entries, each is moved
by some code, names follow Prometheus conventions, and ``docs/metrics.md`` is rendered from it."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import get_type_hints

from ragmon.telemetry import CATALOGUE, SNAPSHOTS, Telemetry
from ragmon.telemetry.reference import _OWNERS, DOC, render

ROOT = Path(__file__).resolve().parents[3]
#: label names that would make a series per trace, user or question (unbounded)
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


def test_telemetry_holds_every_entry_and_nothing_else():
    t = Telemetry()
    declared = set(get_type_hints(Telemetry)) - {"registry"}
    assert declared == {s.attr for s in CATALOGUE} | set(SNAPSHOTS), "annotations on Telemetry = the catalogue"
    families = {f.name for f in t.registry.collect()}
    assert families == {s.name.removesuffix("_total") for s in CATALOGUE}
    members = [m for ms in SNAPSHOTS.values() for m in ms]
    series = {s.attr for s in CATALOGUE if s.kind == "series"}
    assert sorted(members) == sorted(series), "every labelled series family is served by exactly one snapshot"


def test_every_metric_is_moved_by_some_code():
    code = "\n".join(p.read_text(encoding="utf-8") for p in (ROOT / "ragmon").rglob("*.py")
                     if p.name != "catalogue.py")
    unused = [s.attr for s in CATALOGUE if s.kind != "series" and not re.search(rf"\.{s.attr}\b", code)]
    unused += [a for a in SNAPSHOTS if not re.search(rf"\.{a}\b", code)]
    assert unused == [], "metrics no code moves: remove them from the catalogue"


def test_docs_metrics_is_rendered_from_the_catalogue():
    assert DOC.read_text(encoding="utf-8") == render(), "run: python3 -m ragmon.telemetry.reference --write"
