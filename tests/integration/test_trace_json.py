"""The ingest hot path's JSON insert (``TraceRows`` → ``insert_trace_rows``) stores exactly the rows that the
columnar path (``TraceColumns`` → ``insert_columns``) stores, against the real chDB engine.

Each case inserts the same decoded traces both ways into the same table and compares every column read back
(``repr`` of each row, so floats must match to the last bit and NaN drift features compare too).
"""

from __future__ import annotations

import json
import math
import os
import sys
import tempfile
import uuid
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ragmon.contracts.decode import DecodedTrace, FastTrace, decode_trace
from ragmon.contracts.redact import Redactor
from ragmon.metrics.permissions import LeakRule
from ragmon.store import ClickHouseStore, SourcePosition, TraceColumns
from ragmon.store.trace_json import TraceRows
from ragmon.store.trace_rows import SELECT_TRACE_COLUMNS, TRACE_COLUMNS, row_to_trace
from tests.conftest import make_trace

READ = ", ".join((*TRACE_COLUMNS, "n_results", "top1_score", "top2_gap", "mean_score"))
NOW = datetime.now(UTC)


def _decoded(doc: dict[str, Any]) -> FastTrace:
    d = decode_trace(json.dumps(doc, ensure_ascii=False).encode())
    assert isinstance(d, DecodedTrace), d
    return d.trace


def _both_ways(store: ClickHouseStore, traces: list[FastTrace]) -> tuple[list[str], list[str]]:
    """Rows stored by the columnar path and by the JSON path, as reprs, in the same order."""
    at = NOW.replace(microsecond=123_999)
    columns, rows = TraceColumns(), TraceRows(ingested_at=at)
    for i, t in enumerate(traces):
        source = SourcePosition("topic-ü", i % 3, 1_000_000_000_000 + i)
        columns.add(t, source, ingested_at=at)
        rows.add(t, source)
    read = f"SELECT {READ} FROM {store.table('traces')} ORDER BY source_offset"
    store.insert_columns("traces", columns.columns, dedup_token=f"cols-{uuid.uuid4()}")
    expected = [repr(r) for r in store.query(read).result_rows]
    store.command(f"TRUNCATE TABLE {store.table('traces')}")
    assert store.insert_trace_rows(rows, dedup_token=f"json-{uuid.uuid4()}") == len(traces)
    got = [repr(r) for r in store.query(read).result_rows]
    store.command(f"TRUNCATE TABLE {store.table('traces')}")
    assert len(expected) == len(traces)
    return expected, got


def _minimal(**extra: Any) -> dict[str, Any]:
    return {"trace_id": f"m-{uuid.uuid4().hex[:8]}", "query_id": "q", "timestamp": NOW.isoformat(),
            "retriever": {"name": "bm25"}, "question": "?", **extra}


EDGE_CASES: dict[str, dict[str, Any]] = {
    "full": make_trace(),
    "minimal (every optional field missing)": _minimal(),
    "empty retrieved, no citations": make_trace(retrieved=[], citations=[], context={"chunk_ids": []}),
    "null context tokens": make_trace(context={"chunk_ids": ["a"], "tokens": None}),
    "unsorted ranks with ties": make_trace(retrieved=[
        {"chunk_id": "c3", "score": 0.1, "rank": 3}, {"chunk_id": "c1", "score": 0.9, "rank": 1},
        {"chunk_id": "c2a", "score": 0.5, "rank": 2, "text": "first of the tie"},
        {"chunk_id": "c2b", "score": 0.4, "rank": 2, "text": None, "tenant": "t"},
    ]),
    "unicode and escapes": make_trace(
        question="Ünïcödé 漢字 🚀 \"quoted\" back\\slash tab\t nul\u0000 line\nbreak \u2028",
        answer="émoji 👩‍👩‍👧 and RTL \u202e", attributes={"k€y": "välue 🙂", "": ""},
        retrieved=[{"chunk_id": "ç@1", "score": 0.5, "rank": 1, "text": "тест", "tenant": "ténant"}],
        tags=["ä", "b"], user_scope=["groupe-é"]),
    "timestamp with a positive offset and microseconds": make_trace(
        timestamp=(NOW.astimezone(timezone(timedelta(hours=5, minutes=30)))).replace(microsecond=999_999).isoformat()),
    "timestamp with a negative offset": make_trace(
        timestamp=NOW.astimezone(timezone(timedelta(hours=-8))).replace(microsecond=500).isoformat()),
    "timestamp in Z with no fraction": make_trace(timestamp=NOW.strftime("%Y-%m-%dT%H:%M:%SZ")),
    "feedback with rating only": make_trace(feedback={"rating": -1}),
    "feedback with comment only": make_trace(feedback={"comment": "meh 😐"}),
    "feedback null": make_trace(feedback=None),
    "retriever parameters of every type, unsorted": make_trace(retriever={
        "name": "hybrid", "version": "v9", "variant": "canary",
        "parameters": {"z": 0.1, "k": 10, "rerank": True, "model": "ß-model", "alpha": 1e-300}}),
    "latency with total, and awkward floats": make_trace(
        latency_ms={"a": 0.1, "b": 0.2, "total": 0.30000000000000004}, cost_usd=1e-9,
        retrieved=[{"chunk_id": "x", "score": 0.1 + 0.2, "rank": 1}, {"chunk_id": "y", "score": -0.0, "rank": 2},
                   {"chunk_id": "z", "score": 5, "rank": 3}, {"chunk_id": "w", "score": -1.7976931348623157e308,
                                                             "rank": 4}]),
    "latency without total (summed)": make_trace(latency_ms={"x": 0.1, "y": 0.7, "z": 1e-17}),
    "behaviour refuse, shadow variant, error text": make_trace(
        behaviour="refuse", error="upstream timeout", retriever={"name": "dense", "variant": "shadow"}),
    "max counts": make_trace(tokens={"prompt": 4_294_967_295, "completion": 0},
                             citations=[{"sentence": 4_294_967_295, "chunk_id": "c", "quote": None}]),
    "unknown top-level field": make_trace(field_from_the_future={"nested": [1, 2]}),
    "chunks without a score (stored as NaN)": make_trace(retrieved=[
        {"chunk_id": "u1", "score": None, "rank": 1, "text": "no score"}, {"chunk_id": "u2", "score": 0.3, "rank": 2}]),
    "a permission leak (two chunks of other tenants, one repeated, one untenanted)": make_trace(
        tenant="acme", retrieved=[
            {"chunk_id": "own", "score": 0.9, "rank": 1, "tenant": "acme"},
            {"chunk_id": "theirs", "score": 0.8, "rank": 2, "tenant": "globex"},
            {"chunk_id": "theirs", "score": 0.7, "rank": 3, "tenant": "globex"},
            {"chunk_id": "other", "score": 0.6, "rank": 4, "tenant": "initech"},
            {"chunk_id": "nobody", "score": 0.5, "rank": 5}]),
    "a later OTLP version (ingested_at moved by 2 ms)": make_trace(
        attributes={"ragmon.otlp.version": "3", "session.id": "s-1"}),
}


def test_json_rows_equal_columnar_rows_for_edge_cases(store: ClickHouseStore) -> None:
    traces = [_decoded(doc) for doc in EDGE_CASES.values()]
    expected, got = _both_ways(store, traces)
    for name, e, g in zip(EDGE_CASES, expected, got, strict=True):
        assert g == e, f"{name}: JSON path stored\n{g}\nexpected\n{e}"


def test_both_paths_store_the_leak_count_under_the_batch_rule(store: ClickHouseStore) -> None:
    doc = EDGE_CASES["a permission leak (two chunks of other tenants, one repeated, one untenanted)"]
    rule = LeakRule.sharing(["initech"])  # a shared tenant is never a leak
    rows = TraceRows(leak_rule=rule)
    rows.add(_decoded(doc), SourcePosition("t", 0, 1))
    assert rows.leaks == {("hybrid@v1", "production", "consent"): 1}
    store.insert_trace_rows(rows, dedup_token=f"leak-{uuid.uuid4()}")
    cols = TraceColumns()  # the default rule shares nothing: globex and initech both leak
    cols.add(_decoded({**doc, "trace_id": "cols-" + doc["trace_id"]}), SourcePosition("t", 0, 2))
    store.insert_columns("traces", cols.columns, dedup_token=f"leak-{uuid.uuid4()}")
    got = dict(store.query(f"SELECT trace_id, permission_leaks FROM {store.table('traces')} FINAL").result_rows)
    store.command(f"TRUNCATE TABLE {store.table('traces')}")
    assert got == {doc["trace_id"]: 1, "cols-" + doc["trace_id"]: 2}


def test_redacted_traces_store_the_redacted_text(store: ClickHouseStore) -> None:
    redactor = Redactor({"email": r"[\w.+-]+@[\w-]+\.[\w.]+"}, ["question", "answer", "retrieved_text", "quotes"])
    doc = make_trace(question="mail ann@example.com", answer="or bob@example.org")
    doc["retrieved"][0]["text"] = "eve@example.net wrote"
    traces = [redactor.trace(_decoded(doc))]
    expected, got = _both_ways(store, traces)
    assert got == expected and "ann@example.com" not in got[0] and "[REDACTED:email]" in got[0]


def test_a_repeated_token_inserts_once_and_a_new_token_again(store: ClickHouseStore) -> None:
    rows = TraceRows()
    for i in range(5):
        rows.add(_decoded(make_trace()), SourcePosition("t", 0, i))
    for token in ("tok-a", "tok-a", "tok-b"):
        store.insert_trace_rows(rows, dedup_token=token)
    count = store.query(f"SELECT count() FROM {store.table('traces')}").result_rows[0][0]
    assert count == 10


@pytest.mark.parametrize("same_batch", [True, False])
def test_a_later_version_of_a_trace_wins_under_final(store: ClickHouseStore, same_batch: bool) -> None:
    """OTLP repairs (issue 18): version 2 of a trace replaces version 1 whether it is written in the same batch or
    a later one; a chunk without a score is NaN, left out of the score features; the session has its column."""
    v1 = make_trace(trace_id="t-v", retrieved=[{"chunk_id": "a", "score": None, "rank": 1}],
                    attributes={"ragmon.otlp.incomplete": "true", "session.id": "conv-9"})
    v2 = {**v1, "answer": "the repaired answer", "attributes": {"ragmon.otlp.version": "2", "session.id": "conv-9"}}
    first = TraceRows()
    first.add(_decoded(v1), SourcePosition("t", 0, 1))
    if same_batch:
        first.add(_decoded(v2), SourcePosition("t", 0, 2))
    else:
        store.insert_trace_rows(first, dedup_token="v1")
        first = TraceRows(ingested_at=first.ingested_at)  # even at the same millisecond
        first.add(_decoded(v2), SourcePosition("t", 0, 2))
    store.insert_trace_rows(first, dedup_token="v2")
    rows = store.query_rows(f"SELECT answer, attributes, session_id, top1_score, mean_score, n_results "
                            f"FROM {store.table('traces')} FINAL")
    assert len(rows) == 1 and rows[0]["answer"] == "the repaired answer"
    assert "ragmon.otlp.incomplete" not in rows[0]["attributes"] and rows[0]["session_id"] == "conv-9"
    assert math.isnan(rows[0]["top1_score"]) and math.isnan(rows[0]["mean_score"]) and rows[0]["n_results"] == 1
    [doc] = [row_to_trace(r) for r in store.query_rows(f"SELECT {SELECT_TRACE_COLUMNS} FROM {store.table('traces')} "
                                                       "FINAL")]
    assert doc["retrieved"][0]["score"] is None


def test_an_empty_batch_writes_nothing(store: ClickHouseStore) -> None:
    assert store.insert_trace_rows(TraceRows(), dedup_token="empty") == 0


def test_columns_decoded_back_equal_the_columnar_batch() -> None:
    """What the in-memory writer and a server insert: the JSON lines decoded back into columns."""
    traces = [_decoded(doc) for doc in EDGE_CASES.values()]
    at = datetime.now(UTC)
    columns, rows = TraceColumns(), TraceRows(ingested_at=at)
    for i, t in enumerate(traces):
        columns.add(t, SourcePosition("t", 1, i), ingested_at=at)
        rows.add(t, SourcePosition("t", 1, i))
    assert repr(rows.columns()) == repr(columns.columns)


_text = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=30)
_chunk = st.fixed_dictionaries(
    {"chunk_id": st.text(min_size=1, max_size=8).filter(str.strip),
     "score": st.none() | st.floats(allow_nan=False, allow_infinity=False), "rank": st.integers(1, 5)},
    optional={"text": st.none() | _text, "tenant": st.none() | st.text(max_size=5), "doc_id": _text})
_trace = st.builds(
    lambda chunks, q, lat, fb, offset_min, tokens: make_trace(
        retrieved=chunks, question=q, latency_ms=lat, feedback=fb, context={"chunk_ids": [], "tokens": tokens},
        timestamp=NOW.astimezone(timezone(timedelta(minutes=offset_min))).isoformat()),
    st.lists(_chunk, max_size=6), _text,
    st.dictionaries(st.text(max_size=6), st.floats(0, 1e12), max_size=4),
    st.none() | st.fixed_dictionaries({}, optional={"rating": st.none() | st.integers(-1, 1), "comment": _text}),
    st.integers(-12 * 60, 14 * 60), st.none() | st.integers(0, 4_294_967_295))


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(_trace, min_size=1, max_size=8))
def test_json_rows_equal_columnar_rows_for_generated_traces(store: ClickHouseStore, docs: list[dict]) -> None:
    traces = [_decoded(doc) for doc in docs]
    expected, got = _both_ways(store, traces)
    assert got == expected


@pytest.mark.parametrize("name", ["full", "minimal (every optional field missing)"])
def test_the_line_is_canonical_json_of_the_redacted_trace(name: str) -> None:
    """Every field of the structure is written, by position (defaults included: ClickHouse fills in none), and
    a key appears only inside the two map fields."""
    rows = TraceRows()
    rows.add(_decoded(EDGE_CASES[name]), SourcePosition("t", 0, 1))
    line = json.loads(rows.lines[0])
    assert isinstance(line, list) and len(line) == 8  # the trace, params, total latency, lineage, version, leaks
    trace, params, total, topic, partition, offset, version, leaks = line
    assert len(trace) == len(FastTrace.__struct_fields__) == 24  # positions: TRACE_JSON_STRUCTURE; values: the
    # rows-equal tests above
    objects = [i for i, value in enumerate(trace) if isinstance(value, dict)]
    assert objects == [18, 23]  # latency_ms and attributes, the Map columns; everything else is an array or scalar
    assert ((topic, partition, offset, version, leaks) == ("t", 0, 1, 0, 0)
            and isinstance(params, str) and isinstance(total, float))


def test_batch_files_left_by_a_killed_process_are_deleted_at_open(store: ClickHouseStore) -> None:
    """A kill -9 during an insert leaves its batch file (trace text); the next process to open the store
    deletes it, and this process's own files (other stores of this process may be inserting) are kept."""
    store.in_memory_batches = False  # the spool is where batches go without memfd (not Linux)
    spool = store._spool
    assert spool is not None
    spool.mkdir(mode=0o700, exist_ok=True)
    dead, mine = spool / "traces-999999999-abc.jsonl", spool / f"traces-{os.getpid()}-abc.jsonl"
    for f in (dead, mine):
        f.write_bytes(b"{}")
    again = ClickHouseStore.open(store.settings, migrate=False)
    assert again._spool == spool and not dead.exists() and mine.exists()
    mine.unlink()
    rows = TraceRows()
    rows.add(_decoded(make_trace()), SourcePosition("t", 0, 1))
    store.insert_trace_rows(rows, dedup_token="spool")
    assert not spool.exists()  # the file and the then empty directory are removed after the insert


def test_on_linux_a_batch_never_touches_the_disk_outside_clickhouse(store: ClickHouseStore, monkeypatch) -> None:
    """The batch goes to ClickHouse through an anonymous in-memory file: trace text is not written to a
    temporary file, and a killed process leaves nothing behind to sweep."""
    assert sys.platform != "linux" or store.in_memory_batches

    def no_disk(*args, **kwargs):
        raise AssertionError("a batch was written to a temporary file")

    monkeypatch.setattr(tempfile, "NamedTemporaryFile", no_disk)
    rows = TraceRows()
    for i in range(3):
        rows.add(_decoded(make_trace(trace_id=f"memfd-{i}")), SourcePosition("t", 0, i))
    assert store.insert_trace_rows(rows, dedup_token="memfd") == 3
    assert store.insert_trace_rows(rows, dedup_token="memfd") == 3  # the same token again: deduplicated
    got = store.query_rows(f"SELECT trace_id FROM {store.table('traces')} WHERE trace_id LIKE 'memfd-%' ORDER BY "
                           "trace_id")
    assert [r["trace_id"] for r in got] == ["memfd-0", "memfd-1", "memfd-2"]
    assert not store._spool.exists()


@pytest.mark.skipif(not hasattr(os, "memfd_create"), reason="memfd is Linux's")
def test_without_memfd_the_batch_goes_through_the_spool(store: ClickHouseStore, monkeypatch) -> None:
    """A sandbox that refuses memfd_create (a strict seccomp profile) costs a warning, not the insert."""

    def refused(*args, **kwargs):
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(os, "memfd_create", refused)
    store.in_memory_batches = True
    rows = TraceRows()
    rows.add(_decoded(make_trace(trace_id="spool-fallback")), SourcePosition("t", 0, 1))
    assert store.insert_trace_rows(rows, dedup_token="spool-fallback") == 1
    assert not store.in_memory_batches
    got = store.query_rows(f"SELECT count() AS n FROM {store.table('traces')} WHERE trace_id = 'spool-fallback'")
    assert got == [{"n": 1}]
    assert not store._spool.exists()  # the spool file and directory are gone after the insert
