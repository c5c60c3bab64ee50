"""One contract suite for ``ReviewStore``, run against ``InMemoryReviewStore`` and against the ClickHouse queries
on chDB.

What the review role relies on: the week's production traffic counted and sampled (each trace once, only that
week, only production, a seeded order that repeats, stratum minimums first); a trace and its latest verdicts
read back; a selection, its queue and the weeks recorded; labels replaced per (trace, reviewer) and read in
order; the golden marks of the latest labels; signed-out sessions. The only allowed difference is which
traces a seed picks (``cityHash64`` against BLAKE2b), so the sample is checked by its properties.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from ragmon.review.in_memory import InMemoryReviewStore
from ragmon.review.queries import ClickHouseReviewQueries, ReviewStore
from ragmon.review.records import Label, SampledTrace, SelectionRecord, parse_week, previous_week
from tests.conftest import make_trace
from tests.integration.review.support import insert_traces

# two complete weeks recent enough for the traces' TTL, the later one right after the first
WEEK, OTHER_WEEK = previous_week(datetime.now(UTC) - timedelta(days=7)), previous_week(datetime.now(UTC))
START, _ = parse_week(WEEK)
AT = START + timedelta(days=8, hours=9, milliseconds=250)  # when reviewers work: the week after


class InMemoryBackend:
    def __init__(self) -> None:
        self.store = InMemoryReviewStore()

    def add_traces(self, traces: list[dict[str, Any]]) -> None:
        self.store.add_traces(traces)

    def add_score(self, trace: dict[str, Any], metric: str, value: float, **kw: Any) -> None:
        self.store.add_score(trace, metric, value, **kw)


class ChDBBackend:
    def __init__(self, store: Any) -> None:
        self.raw = store
        self.store = ClickHouseReviewQueries(store)

    def add_traces(self, traces: list[dict[str, Any]]) -> None:
        insert_traces(self.raw, traces)

    def add_score(self, trace: dict[str, Any], metric: str, value: float, *, status: str = "ok", error: str = "",
                  judge_name: str = "heuristic", fingerprint: str = "fp-heuristic-1", details: str = "",
                  scored_at: datetime | None = None) -> None:
        r = trace["retriever"]
        self.raw.insert_rows("scores", [[
            trace["trace_id"], trace["query_id"], datetime.fromisoformat(trace["timestamp"]),
            scored_at or datetime.now(UTC), r["name"], r["version"], r["variant"], trace.get("category", ""), metric,
            value, status, error, judge_name, fingerprint, details]],
            ["trace_id", "query_id", "ts", "scored_at", "retriever_name", "retriever_version", "variant", "category",
             "metric", "value", "status", "error", "judge_name", "judge_fingerprint", "details"])


@pytest.fixture(params=["in_memory", "chdb"])
def backend(request: pytest.FixtureRequest) -> Iterator[Any]:
    if request.param == "in_memory":
        yield InMemoryBackend()
    else:
        yield ChDBBackend(request.getfixturevalue("store"))


def traffic(n: int, categories: list[str], *, prefix: str = "t", start: datetime = START, **overrides: Any
            ) -> list[dict[str, Any]]:
    """``n`` traces spread over the week from ``start``, categories in turn."""
    return [make_trace(trace_id=f"{prefix}-{i:03d}", query_id=f"q-{prefix}-{i:03d}",
                       timestamp=(start + timedelta(minutes=97 * i, microseconds=123_456)).isoformat(),
                       category=categories[i % len(categories)], **overrides) for i in range(n)]


def label(trace_id: str, reviewer: str, minutes: int = 0, week: str = WEEK, **kw: Any) -> Label:
    values: dict[str, Any] = dict(answer_correct=True, grounded=None, citations_supported=False,
                                  refusal_appropriate=None, expected_behaviour="answer")
    values.update(kw)
    return Label(week, trace_id, reviewer, AT + timedelta(minutes=minutes), **values)


def as_read(lab: Label) -> Label:
    """A label as the store gives it back: its time in UTC without tzinfo."""
    return replace(lab, labelled_at=lab.labelled_at.astimezone(UTC).replace(tzinfo=None))


def test_an_empty_store_has_no_weeks_queue_labels_or_traffic(backend):
    s: ReviewStore = backend.store
    assert isinstance(s, ReviewStore)
    assert (s.weeks(), s.selection(WEEK), s.queue(WEEK), s.in_queue(WEEK, "t-000")) == ([], None, [], False)
    assert (s.leftover_seed(WEEK), s.labels_of_week(WEEK), s.labels_for("t-000"), s.golden_marked()) == (
        None, {}, [], [])
    assert (s.population(WEEK), s.sample(WEEK, "seed", 10), s.trace(WEEK, "t-000"), s.verdicts(WEEK, "t-000")) == (
        {}, [], None, [])


def test_population_counts_each_production_trace_of_the_week_once(backend):
    week = traffic(30, ["a", "b", "c"])
    backend.add_traces(week)
    backend.add_traces(week[:5])  # re-delivered
    backend.add_traces(traffic(10, ["a"], prefix="shadow",
                               retriever={"name": "hybrid", "version": "v2", "variant": "shadow"}))
    backend.add_traces(traffic(10, ["a"], prefix="later", start=START + timedelta(days=7)))
    assert backend.store.population(WEEK) == {"a": 10, "b": 10, "c": 10}
    assert backend.store.population(OTHER_WEEK) == {"a": 10}


def test_the_sample_is_a_seeded_order_of_the_weeks_production_traces(backend):
    week = traffic(40, ["a", "b", "c", "d"])
    backend.add_traces(week + week[:3])
    backend.add_traces(traffic(10, ["a"], prefix="shadow",
                               retriever={"name": "hybrid", "version": "v2", "variant": "shadow"}))
    s = backend.store
    everything = s.sample(WEEK, "seed-1", 1000)
    assert sorted(t.trace_id for t in everything) == sorted(t["trace_id"] for t in week)
    assert [t.position for t in everything] == list(range(40))
    by_id = {t["trace_id"]: t for t in week}
    assert all((t.query_id, t.category) == (by_id[t.trace_id]["query_id"], by_id[t.trace_id]["category"])
               for t in everything)
    first = s.sample(WEEK, "seed-1", 12)
    assert first == everything[:12] and s.sample(WEEK, "seed-1", 12) == first
    assert [t.trace_id for t in s.sample(WEEK, "seed-2", 12)] != [t.trace_id for t in first]
    assert s.sample(OTHER_WEEK, "seed-1", 12) == []


def test_a_stratified_sample_takes_the_minimum_of_every_stratum_first(backend):
    backend.add_traces(traffic(80, ["big"] * 18 + ["rare", "tiny"]))  # 72 big, 4 rare, 4 tiny
    plain = backend.store.sample(WEEK, "k", 10)
    strat = backend.store.sample(WEEK, "k", 10, min_per_stratum=3)
    got = Counter(t.category for t in strat)
    assert len(strat) == 10 and got["big"] >= 3 and got["rare"] >= 3 and got["tiny"] >= 3
    assert Counter(t.category for t in plain)["rare"] < 3  # without it the minimum is not met: not vacuous
    # a stratum's minimum is its first traces in the seeded order, so the choice within it stays uniform
    order = backend.store.sample(WEEK, "k", 1000)
    for stratum in ("rare", "tiny"):
        first = [t.trace_id for t in order if t.category == stratum][:3]
        assert set(first) <= {t.trace_id for t in strat}


def test_a_trace_of_the_week_reads_back_as_a_trace_document(backend):
    [t] = traffic(1, ["consent"])
    backend.add_traces([t])
    doc = backend.store.trace(WEEK, t["trace_id"])
    assert doc is not None
    for key in ("trace_id", "query_id", "question", "category", "answer", "behaviour", "corpus_snapshot"):
        assert doc[key] == t[key], key
    assert [c["chunk_id"] for c in doc["retrieved"]] == [c["chunk_id"] for c in t["retrieved"]]
    assert [c["text"] for c in doc["retrieved"]] == [c["text"] for c in t["retrieved"]]
    assert doc["citations"] == [dict(c) for c in t["citations"]]
    assert (datetime.fromisoformat(doc["timestamp"])
            == datetime.fromisoformat(t["timestamp"]).replace(microsecond=123_000))
    assert backend.store.trace(OTHER_WEEK, t["trace_id"]) is None
    assert backend.store.trace(WEEK, "nope") is None


def test_verdicts_are_the_latest_score_per_fingerprint_and_metric(backend):
    [t] = traffic(1, ["consent"])
    backend.add_traces([t])
    backend.add_score(t, "faithfulness", 0.25, fingerprint="fp-b", scored_at=AT)
    backend.add_score(t, "faithfulness", 0.75, fingerprint="fp-b", scored_at=AT + timedelta(hours=1),
                      details=json.dumps({"why": "re-scored"}))
    backend.add_score(t, "answer_relevance", float("nan"), status="failed", error="timeout", fingerprint="fp-b")
    backend.add_score(t, "faithfulness", 0.5, fingerprint="fp-a", judge_name="openai", details="not json")
    got = backend.store.verdicts(WEEK, t["trace_id"])
    assert [(v.judge_fingerprint, v.metric) for v in got] == [
        ("fp-a", "faithfulness"), ("fp-b", "answer_relevance"), ("fp-b", "faithfulness")]
    assert (got[0].value, got[0].judge_name, got[0].details) == (0.5, "openai", "not json")
    assert (got[1].status, got[1].error, got[1].details) == ("failed", "timeout", None) and got[1].value != got[1].value
    assert (got[2].value, got[2].details) == (0.75, {"why": "re-scored"})
    assert backend.store.verdicts(OTHER_WEEK, t["trace_id"]) == []


def test_a_selection_its_queue_and_the_weeks_are_recorded(backend):
    s = backend.store
    items = [SampledTrace(f"t-{i}", f"q-{i}", "ab"[i % 2], i) for i in (2, 0, 1)]
    s.add_to_queue(WEEK, items, "seed-x", AT)
    assert s.leftover_seed(WEEK) == "seed-x" and s.selection(WEEK) is None  # a selection that died half-way
    s.add_to_queue(WEEK, items, "seed-x", AT + timedelta(seconds=1))  # the retry writes the same rows again
    record = SelectionRecord(WEEK, "seed-x", 3, True, 1, 50, 3, "method", "cli", AT)
    s.record_selection(record)
    s.record_selection(replace(record, week=OTHER_WEEK, seed="seed-y"))
    assert s.queue(WEEK) == sorted(items, key=lambda t: t.position)
    assert s.in_queue(WEEK, "t-1") and not s.in_queue(OTHER_WEEK, "t-1") and not s.in_queue(WEEK, "t-9")
    assert s.selection(WEEK) == replace(record, selected_at=AT.replace(tzinfo=None))
    assert s.weeks() == [OTHER_WEEK, WEEK]
    assert s.queue(OTHER_WEEK) == [] and s.leftover_seed(OTHER_WEEK) is None


def test_a_reviewers_later_label_replaces_the_earlier_one_and_others_are_kept(backend):
    s = backend.store
    s.add_to_queue(WEEK, [SampledTrace("t-1", "q-1", "a", 0), SampledTrace("t-2", "q-2", "a", 1)], "seed", AT)
    bob = label("t-1", "bob", 1, note="unsure of grounding", relevant_chunk_ids=("c1", "c2"))
    alice_first = label("t-1", "alice", 2, add_to_golden=True)
    alice_then = label("t-1", "alice", 5, answer_correct=False, reference_answer="No.", add_to_golden=False)
    for lab in (alice_first, bob, alice_then):
        s.save_label(lab)
    assert s.labels_for("t-1") == [as_read(bob), as_read(alice_then)]
    s.save_label(label("t-2", "alice", 3))
    s.save_label(label("t-3", "alice", 3))  # not queued that week
    s.save_label(label("t-2", "carol", 4, week=OTHER_WEEK))  # filed under another week
    assert s.labels_of_week(WEEK) == {"t-1": [as_read(bob), as_read(alice_then)],
                                      "t-2": [as_read(label("t-2", "alice", 3))]}


def test_golden_marks_follow_each_reviewers_latest_label(backend):
    s = backend.store
    s.save_label(label("t-1", "alice", 1, add_to_golden=True))
    s.save_label(label("t-1", "alice", 2, add_to_golden=False))  # changed her mind
    s.save_label(label("t-2", "alice", 1, add_to_golden=True))
    s.save_label(label("t-2", "bob", 2, add_to_golden=True))
    s.save_label(label("t-0", "bob", 2, add_to_golden=True, week=OTHER_WEEK))
    assert s.golden_marked() == [(WEEK, "t-2"), (OTHER_WEEK, "t-0")]
    assert s.golden_marked(OTHER_WEEK) == [(OTHER_WEEK, "t-0")]


def test_a_signed_out_session_stays_signed_out(backend):
    s = backend.store
    assert not s.is_signed_out("d1")
    now = datetime.now(UTC)  # rows of sessions that expired over a day ago are deleted (TTL)
    s.sign_out("d1", "alice", now, now + timedelta(hours=8))
    assert s.is_signed_out("d1") and not s.is_signed_out("d2")
