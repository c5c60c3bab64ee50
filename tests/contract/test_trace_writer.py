"""One contract suite for ``TraceWriter``, run against the in-memory double and against chDB (``StoreTraceWriter``).

What the ingest loop relies on: ``write`` returns once the rows are stored and says how many; a repeated
deduplication token is acknowledged and ignored (a retry after a lost acknowledgement stores nothing twice),
while a new token is a new write; an empty batch writes nothing and does not use up its token; a failure
raises a ``StoreError`` (never a client library's exception) that says whether it is worth retrying, and
stores nothing, so the same batch and token written again once the store is back land once; and it may be
called from the writer thread. ``stored_leaks`` says, for leaking traces of a batch, the largest leak count the
store holds for each already (a re-delivery), found by the trace's key. The writer does not own the store: it has
nothing to close.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from ragmon.contracts.decode import decode_trace
from ragmon.errors import PermanentStoreError, RetryableStoreError, StoreError
from ragmon.metrics.permissions import LeakRule
from ragmon.pipeline.writer import InMemoryTraceWriter, StoreTraceWriter
from ragmon.store.trace_json import TraceRows
from ragmon.store.trace_rows import SourcePosition
from tests.conftest import make_trace

T = "contract.traces"


class InMemoryBackend:
    def __init__(self) -> None:
        self.writer = InMemoryTraceWriter()

    def stored(self) -> list[tuple[str, int, int]]:
        """(trace id, source partition, source offset) of every row written, duplicates included."""
        return sorted((r["trace_id"], r["source_partition"], r["source_offset"]) for r in self.writer.rows)

    def break_store(self) -> None:
        self.writer.fail_next = 1_000_000

    def repair_store(self) -> None:
        self.writer.fail_next = 0


class ChdbBackend:
    def __init__(self, store: Any) -> None:
        self.store = store
        self.writer = StoreTraceWriter(store)

    def stored(self) -> list[tuple[str, int, int]]:
        # without FINAL: a row inserted twice shows twice, so the token is what is tested, not the merge
        rows = self.store.query(f"SELECT trace_id, source_partition, source_offset FROM {self.store.table('traces')}")
        return sorted((r[0], int(r[1]), int(r[2])) for r in rows.result_rows)

    def break_store(self) -> None:
        self.store.command(f"DETACH TABLE {self.store.table('traces')}")  # inserts fail for real

    def repair_store(self) -> None:
        self.store.command(f"ATTACH TABLE {self.store.table('traces')}")


@pytest.fixture(params=["in_memory", "chdb"])
def backend(request: pytest.FixtureRequest) -> Iterator[Any]:
    if request.param == "in_memory":
        yield InMemoryBackend()
    else:
        yield ChdbBackend(request.getfixturevalue("store"))


def rows(*ids: str, partition: int = 0, first_offset: int = 0) -> TraceRows:
    out = TraceRows()
    for i, trace_id in enumerate(ids):
        value = json.dumps(make_trace(trace_id=trace_id)).encode()
        out.add(decode_trace(value).trace, SourcePosition(T, partition, first_offset + i), size_bytes=len(value))
    return out


def test_write_returns_once_the_rows_are_stored_and_says_how_many(backend):
    assert backend.writer.write(rows("a", "b", "c", partition=2, first_offset=10), "tok-1") == 3
    assert backend.stored() == [("a", 2, 10), ("b", 2, 11), ("c", 2, 12)]


def test_a_repeated_token_is_acknowledged_and_ignored(backend):
    batch = rows("a", "b")
    assert backend.writer.write(batch, "tok-1") == 2
    assert backend.writer.write(batch, "tok-1") == 2  # a retry after a lost acknowledgement
    assert backend.stored() == [("a", 0, 0), ("b", 0, 1)]


def test_a_new_token_is_a_new_write(backend):
    backend.writer.write(rows("a"), "tok-1")
    backend.writer.write(rows("a"), "tok-2")  # a re-read trace in another batch: two rows (FINAL collapses them)
    assert backend.stored() == [("a", 0, 0), ("a", 0, 0)]


def test_an_empty_batch_writes_nothing_and_does_not_use_up_its_token(backend):
    assert backend.writer.write(TraceRows(), "tok-1") == 0
    assert backend.stored() == []
    assert backend.writer.write(rows("a"), "tok-1") == 1
    assert backend.stored() == [("a", 0, 0)]


def test_a_failing_store_raises_a_store_error_stores_nothing_and_the_retry_lands_once(backend):
    batch = rows("a", "b")
    backend.break_store()
    try:
        with pytest.raises(StoreError) as caught:
            backend.writer.write(batch, "tok-1")
    finally:
        backend.repair_store()
    assert type(caught.value) in (RetryableStoreError, PermanentStoreError)
    assert caught.value.retryable is isinstance(caught.value, RetryableStoreError)
    assert backend.stored() == []
    assert backend.writer.write(batch, "tok-1") == 2
    assert backend.writer.write(batch, "tok-1") == 2
    assert backend.stored() == [("a", 0, 0), ("b", 0, 1)]


def test_it_can_be_called_from_the_writer_thread(backend):
    with ThreadPoolExecutor(1) as pool:
        assert pool.submit(backend.writer.write, rows("a", "b"), "tok-1").result(timeout=60) == 2
    assert backend.stored() == [("a", 0, 0), ("b", 0, 1)]


def _leaky(*ids: str, foreign: int = 1) -> TraceRows:
    out = TraceRows(leak_rule=LeakRule())
    for i, trace_id in enumerate(ids):
        chunks = [{"chunk_id": f"g@{n}", "doc_id": "g", "doc_version": "1", "score": 0.5, "rank": n + 1,
                   "tenant": "globex"} for n in range(foreign)]
        value = json.dumps(make_trace(trace_id=trace_id, tenant="acme", retrieved=chunks)).encode()
        out.add(decode_trace(value).trace, SourcePosition(T, 0, i), size_bytes=len(value))
    return out


def test_stored_leaks_names_the_leaking_traces_stored_already_with_their_largest_count(backend):
    first = _leaky("a", "b")
    assert backend.writer.stored_leaks(first.leaking) == {}  # nothing stored yet
    backend.writer.write(first, "tok-1")
    again = _leaky("a", "c", foreign=2)  # "a" delivered again, now with two foreign chunks; "c" is new
    assert backend.writer.stored_leaks(again.leaking) == {"a": 1}
    backend.writer.write(again, "tok-2")
    assert backend.writer.stored_leaks(_leaky("a", "b", "c").leaking) == {"a": 2, "b": 1, "c": 2}
