"""One insert's worth of traces: columnar rows, the dead letters beside them, and the dedup token.

Owns: accumulating decoded traces into a ``TraceRows`` batch (JSON lines) up to ``max_batch_rows`` / ``max_batch_bytes``
/ ``flush_interval_seconds``, the ledger entries the batch releases once acknowledged, and the insert
deduplication token. The token is derived from the source ranges (topic/partition/first–last offset) and
the trace ids in the batch, so a retried insert of the same batch is a no-op in ClickHouse while two
different batches can never share a token (a token reused for different rows would drop them). No I/O.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import UTC, datetime

from ragmon.contracts.decode import FastTrace
from ragmon.ingest.dead_letter import DeadLetter
from ragmon.ingest.offsets import Entry, release_trace
from ragmon.ingest.source import Partition
from ragmon.store.trace_json import TraceRows
from ragmon.store.trace_rows import SourcePosition


@dataclass(frozen=True, slots=True)
class BatchLimits:
    max_rows: int
    max_bytes: int
    max_wait_seconds: float


class Batch:
    """Traces and dead letters awaiting one acknowledged write. Not thread-safe."""

    def __init__(self, limits: BatchLimits, opened_at: float):
        self.limits = limits
        self.opened_at = opened_at
        self._now = datetime.now(UTC)
        self.rows = TraceRows(ingested_at=self._now)
        self.dead_letters: list[DeadLetter] = []
        self.entries: list[list[Entry]] = []  # one group per trace/letter, released when acknowledged
        self.ranges: dict[Partition, list[int]] = {}
        self.bytes = 0
        self.stored = False
        self.dead_letters_sent = False
        self._token: str | None = None

    def __len__(self) -> int:
        return len(self.rows)

    @property
    def empty(self) -> bool:
        return not len(self.rows) and not self.dead_letters and not self.entries

    def _cover(self, partition: Partition, offset: int) -> None:
        r = self.ranges.get(partition)
        if r is None:
            self.ranges[partition] = [offset, offset]
        else:
            r[0] = min(r[0], offset)
            r[1] = max(r[1], offset)

    def add_trace(self, trace: FastTrace, source: SourcePosition, size_bytes: int, entries: list[Entry]) -> None:
        self.rows.add(trace, source, size_bytes=size_bytes)
        self.bytes += size_bytes
        self.entries.append(entries)
        for e in entries:
            self._cover(e.partition, e.offset)

    def add_dead_letter(self, letter: DeadLetter, entries: list[Entry]) -> None:
        self.dead_letters.append(letter)
        self.bytes += len(letter.value)
        self.entries.append(entries)
        self._cover((letter.topic, letter.partition), letter.offset)

    def add_entries(self, entries: list[Entry]) -> None:
        """Obligations released with this batch without a row (e.g. an OTLP trace dropped as incomplete)."""
        self.entries.append(entries)

    def full(self) -> bool:
        return len(self.rows) + len(self.dead_letters) >= self.limits.max_rows or self.bytes >= self.limits.max_bytes

    def due(self, now: float) -> bool:
        return not self.empty and (self.full() or now - self.opened_at >= self.limits.max_wait_seconds)

    def dedup_token(self) -> str:
        """Stable for this batch: source ranges + a digest of its trace ids, in insertion order."""
        if self._token is None:
            ranges = ",".join(f"{t}/{p}/{a}-{b}" for (t, p), (a, b) in sorted(self.ranges.items()))
            digest = hashlib.blake2b("\n".join(self.rows.trace_ids).encode(), digest_size=12)
            self._token = f"ragmon:{ranges}:{len(self.rows)}:{digest.hexdigest()}"
        return self._token

    def release(self) -> None:
        """Close this batch's obligations in the ledger (call once, after every write it needs succeeded)."""
        for group in self.entries:
            release_trace(group)
        self.entries = []
