"""Where batches of traces are written: the ``TraceWriter`` contract, the ClickHouse one, an in-memory double.

Owns the seam between the ingest loop and the store. It must not retry (the pipeline decides) nor swallow
errors: ``write`` either returns after the store acknowledged, or raises a ``StoreError``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from ragmon.errors import PermanentStoreError, RetryableStoreError
from ragmon.store.trace_json import LeakRow, TraceRows


class TraceWriter(Protocol):
    """Writes one batch of traces (``TraceRows``) into ``traces``. Blocking.

    Idempotent for a repeated ``dedup_token`` (a retry after an ambiguous failure is a no-op). Raises
    ``RetryableStoreError`` (try again later) or ``PermanentStoreError``. Not thread-safe.
    """

    def write(self, rows: TraceRows, dedup_token: str) -> int: ...

    def stored_leaks(self, rows: Sequence[LeakRow]) -> dict[str, int]:
        """The largest permission-leak count already stored for each of these traces (absent: not stored), so
        a re-delivered trace is not counted again. Blocking; raises ``StoreError`` like ``write``."""
        ...


class TraceInserter(Protocol):
    """What ``StoreTraceWriter`` needs of a store (``ClickHouseStore`` has it): one blocking insert of a batch
    into ``traces``, deduplicated by the token, and the leak counts stored for some traces; raise ``StoreError``."""

    def insert_trace_rows(self, rows: TraceRows, *, dedup_token: str | None = None) -> int: ...

    def stored_leaks(self, rows: Sequence[LeakRow]) -> dict[str, int]: ...


class StoreTraceWriter:
    """``TraceWriter`` over a store: one insert into ``traces`` with the token."""

    def __init__(self, store: TraceInserter):
        self._store = store

    def write(self, rows: TraceRows, dedup_token: str) -> int:
        return self._store.insert_trace_rows(rows, dedup_token=dedup_token)

    def stored_leaks(self, rows: Sequence[LeakRow]) -> dict[str, int]:
        return self._store.stored_leaks(rows)


@dataclass
class InMemoryTraceWriter:
    """Test double with ClickHouse's token semantics: a repeated token is acknowledged and ignored.

    ``fail_next`` makes that many writes raise ``RetryableStoreError`` (``permanent=True``: the permanent
    kind); ``fail_after_write`` makes that many writes store the rows and THEN raise (an ambiguous failure:
    the ack was lost), which the token must absorb on retry.
    """

    rows: list[dict[str, Any]] = field(default_factory=list)
    tokens: list[str] = field(default_factory=list)
    fail_next: int = 0
    fail_after_write: int = 0
    permanent: bool = False
    attempts: int = 0

    def write(self, rows: TraceRows, dedup_token: str) -> int:
        self.attempts += 1
        if not len(rows):  # as the store: nothing to insert, no round trip, the token is not used up
            return 0
        if self.fail_next > 0:
            self.fail_next -= 1
            raise (PermanentStoreError if self.permanent else RetryableStoreError)("in-memory store down (test)")
        n = len(rows)
        if dedup_token not in self.tokens:
            columns = rows.columns()  # the JSON lines decoded back: the double sees what ClickHouse would parse
            self.tokens.append(dedup_token)  # only once the rows are readable: a failed read stores nothing
            names = list(columns)
            self.rows.extend({k: columns[k][i] for k in names} for i in range(n))
        if self.fail_after_write > 0:
            self.fail_after_write -= 1
            raise RetryableStoreError("in-memory ack lost (test)")
        return n

    def stored_leaks(self, rows: Sequence[LeakRow]) -> dict[str, int]:
        if self.fail_next > 0:  # the store is down for reads too
            raise (PermanentStoreError if self.permanent else RetryableStoreError)("in-memory store down (test)")
        wanted = {r.trace_id for r in rows}
        out: dict[str, int] = {}
        for row in self.rows:
            if row["trace_id"] in wanted:
                out[row["trace_id"]] = max(out.get(row["trace_id"], 0), int(row["permission_leaks"]))
        return out

    def trace_ids(self) -> list[str]:
        return [r["trace_id"] for r in self.rows]
