"""One insert's worth of traces, and the batching step of the ingest loop that fills it.

Owns: accumulating decoded traces into a ``TraceRows`` batch (JSON lines) up to ``max_batch_rows`` / ``max_batch_bytes``
/ ``flush_interval_seconds``, the ledger entries the batch releases once acknowledged, how many traces of each kind
its rows and its dead letters settle once acknowledged (``settles``), and the insert deduplication token. The token is
derived from the source ranges (topic/partition/first–last offset) and the trace ids in the batch, so a retried insert
of the same batch is a no-op in ClickHouse while two different batches can never share a token (a token reused for
different rows would drop them).

``BatchStep`` adds what intake produced to the open batch and hands the batch to the next step (the writer)
when it is full or due; it knows nothing else of the loop. No I/O.
"""

from __future__ import annotations

import hashlib
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Protocol

from ragmon.contracts.decode import FastTrace
from ragmon.metrics.permissions import LeakRule
from ragmon.pipeline.offsets import Entry, release_trace
from ragmon.store.trace_json import TraceRows
from ragmon.store.trace_rows import SourcePosition
from ragmon.stream.dead_letter import DeadLetter
from ragmon.stream.source import Partition

#: the kinds of trace an acknowledged row or dead letter settles (``ragmon_ingest_traces_settled_total{kind}``): a
#: message that is one trace (or is rejected whole), an OTLP trace assembled from spans; '' settles none (a later
#: version of a stored OTLP trace, late spans of one)
MESSAGE, OTLP_TRACE = "message", "otlp_trace"

#: What intake produces, one per trace or dead letter, in message order; plain tuples, since one is built per
#: message: ``(trace, where it was read, its size in bytes, its ledger entries, the kind it settles)`` for a trace
#: to store, or ``(dead letter, its ledger entries, the kind it settles)``.
TraceItem = tuple[FastTrace, SourcePosition, int, list[Entry], str]
LetterItem = tuple[DeadLetter, list[Entry], str]
Produced = TraceItem | LetterItem


@dataclass(frozen=True, slots=True)
class BatchLimits:
    max_rows: int
    max_bytes: int
    max_wait_seconds: float


class FlushWait:
    """How long a new batch may wait before it is written: ``flush_interval_seconds``, or, with a freshness target,
    as long as the target allows. Fewer, bigger inserts make fewer parts for the engine to merge (docs/ingest.md,
    "Soak"), so the wait is the target less the slowest recent insert and a margin for polling and the commit,
    kept within [min(floor, target), target]: a slow store shortens the wait, a fast one lengthens it. Not
    thread-safe: ``observe`` is called by the write step, ``seconds`` by the loop, and a deque's append and
    iteration are atomic enough for a bound that only needs to be recent.
    """

    MARGIN_SECONDS = 0.25
    WINDOW = 8

    def __init__(self, floor_seconds: float, target_seconds: float | None = None):
        self.floor = floor_seconds
        self.target = target_seconds
        self._recent: deque[float] = deque(maxlen=self.WINDOW)

    def observe(self, write_seconds: float) -> None:
        """One insert took ``write_seconds`` to be acknowledged."""
        self._recent.append(write_seconds)

    def seconds(self) -> float:
        if self.target is None:
            return self.floor
        slowest = max(self._recent, default=self.floor)  # before any write: as if one took the floor
        return min(self.target, max(self.floor, self.target - slowest - self.MARGIN_SECONDS))


class Batch:
    """Traces and dead letters awaiting one acknowledged write. Not thread-safe."""

    def __init__(self, limits: BatchLimits, opened_at: float, leak_rule: LeakRule | None = None):
        self.limits = limits
        self.opened_at = opened_at
        self.rows = TraceRows(leak_rule=leak_rule)  # its ingested_at is set when it is written (``stamp``)
        self.dead_letters: list[DeadLetter] = []
        #: traces settled once the rows are stored, and once the dead letters are acknowledged, by kind
        self.settles_stored: dict[str, int] = {}
        self.settles_dead_lettered: dict[str, int] = {}
        self.entries: list[list[Entry]] = []  # one group per trace/letter, released when acknowledged
        self.ranges: dict[Partition, list[int]] = {}
        self.bytes = 0
        self.stored = False
        self.dead_letters_sent = False
        self._token: str | None = None
        #: trace id → permission leaks already stored before this batch's first write (None: not asked yet)
        self.leaks_before: dict[str, int] | None = None

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

    def add_trace(self, trace: FastTrace, source: SourcePosition, size_bytes: int, entries: list[Entry],
                  settles: str = MESSAGE) -> None:
        self.rows.add(trace, source, size_bytes=size_bytes)
        self.bytes += size_bytes
        self.entries.append(entries)
        for e in entries:
            self._cover(e.partition, e.offset)
        if settles:
            self.settles_stored[settles] = self.settles_stored.get(settles, 0) + 1

    def add_dead_letter(self, letter: DeadLetter, entries: list[Entry], settles: str = MESSAGE) -> None:
        self.dead_letters.append(letter)
        self.bytes += len(letter.value)
        self.entries.append(entries)
        self._cover((letter.topic, letter.partition), letter.offset)
        if settles:
            self.settles_dead_lettered[settles] = self.settles_dead_lettered.get(settles, 0) + 1

    def stamp(self) -> None:
        """Its rows' ``ingested_at`` (the ReplacingMergeTree's version): now, as it is written. Called before each
        attempt: a retry that stores the rows stores them with its own time, one deduplicated keeps the first's."""
        self.rows.ingested_at = datetime.now(UTC)

    def unsettled(self) -> dict[str, int]:
        """Traces this batch would settle but has not yet (its rows unless stored, its dead letters unless sent),
        by kind: what a stop or a revocation gives back to the source to re-read."""
        out: dict[str, int] = {}
        for done, counts in ((self.stored, self.settles_stored), (self.dead_letters_sent, self.settles_dead_lettered)):
            if not done:
                for kind, n in counts.items():
                    out[kind] = out.get(kind, 0) + n
        return out

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


class BatchSink(Protocol):
    """The step after batching: takes a batch to write, or refuses it (``False``) while a failed write waits."""

    def submit(self, batch: Batch) -> bool: ...


class BatchStep:
    """The open batch: filled with what intake produced, handed on when full or due. Not thread-safe.

    While the next step refuses a full batch (a failed write waits for its retry), the batch keeps what it is
    given: the loop pauses the source meanwhile, so it grows by the rest of one poll at most.
    """

    def __init__(self, limits: BatchLimits, next_step: BatchSink, clock: Callable[[], float],
                 wait: FlushWait | None = None, leak_rule: LeakRule | None = None):
        self.limits = limits
        self._next = next_step
        self._clock = clock
        self._leak_rule = leak_rule  # every batch counts each trace's permission leaks with it
        self.wait = wait or FlushWait(limits.max_wait_seconds)
        self.batch = self._open()

    def submit(self, produced: Iterable[Produced]) -> None:
        """Add every item in order; hand the batch on each time it is full (mid-poll: the write then overlaps
        the decoding of the rest). ``produced`` may be lazy: each item is consumed as soon as it is made."""
        batch = self.batch
        for item in produced:
            if len(item) == 5:
                batch.add_trace(*item)
            else:
                batch.add_dead_letter(*item)
            if batch.full() and self.hand_on():
                batch = self.batch

    @property
    def empty(self) -> bool:
        return self.batch.empty

    def due(self, now: float) -> bool:
        return self.batch.due(now)

    def wait_seconds(self, now: float) -> float:
        """Seconds until the open batch is due; ``inf`` while it is empty (nothing to flush)."""
        batch = self.batch
        if batch.empty:
            return float("inf")
        return max(0.0, batch.limits.max_wait_seconds - (now - batch.opened_at))

    def hand_on(self) -> bool:
        """Give the open batch to the next step and open a new one; False (batch kept) if it was refused."""
        if not self._next.submit(self.batch):
            return False
        self.batch = self._open()
        return True

    def seal(self) -> Batch:
        """Take the open batch out (to write it now, outside the usual hand-on) and open a new one."""
        batch, self.batch = self.batch, self._open()
        return batch

    def _open(self) -> Batch:
        """A new batch, its wait fixed when it opens."""
        return Batch(replace(self.limits, max_wait_seconds=self.wait.seconds()), self._clock(), self._leak_rule)

    def discard(self) -> Batch:
        """Drop what is buffered and return it (its partitions were revoked; their next owner re-reads it)."""
        return self.seal()
