"""``ScoreLedger``: which offsets the score loop may commit while judgements finish out of order.

Every message read gets a ticket. A ticket is *stored* once the rows it produces (a sampling decision, and scores
for a sampled trace) are in the store. The offset committable for a partition is the one of its oldest ticket not
yet stored, or one past the newest message read when all are stored: a commit never passes a trace whose scores
are not stored, however the judgements complete. Memory is one small entry per ticket not yet stored; stored
tickets are forgotten at once.

A partition whose position goes back (a rebalance handed it over and back, or a seek) starts a new record: the
tickets of the old one still resolve, but no longer move its commit. Pure bookkeeping: no I/O, no clock, no Kafka
types (partitions are any hashable). Not thread-safe: the score loop owns it.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field


@dataclass(eq=False, slots=True)
class _Partition:
    #: offsets read and not yet stored, in reading order (which is offset order within one record)
    pending: dict[int, None] = field(default_factory=dict)
    #: one past the newest offset read
    end: int = 0
    #: the last offset committed (or handed out to commit)
    committed: int | None = None


@dataclass(frozen=True, slots=True)
class Ticket:
    """One message read: resolve it with ``ScoreLedger.stored`` once its rows are in the store."""

    partition: Hashable
    offset: int
    record: _Partition


class ScoreLedger:
    """Per-partition record of the messages read and not yet stored. See the module docstring."""

    def __init__(self) -> None:
        self._partitions: dict[Hashable, _Partition] = {}

    def read(self, partition: Hashable, offset: int) -> Ticket:
        """A message was read at ``offset``; its rows are not stored yet."""
        record = self._partitions.get(partition)
        if record is None or offset < record.end:  # new, or the position went back: a fresh record
            record = self._partitions[partition] = _Partition(end=offset)
        record.pending[offset] = None
        record.end = offset + 1
        return Ticket(partition, offset, record)

    def stored(self, ticket: Ticket) -> None:
        """The ticket's rows are in the store (idempotent)."""
        ticket.record.pending.pop(ticket.offset, None)

    def committable(self) -> dict[Hashable, int]:
        """Offsets to commit now: per partition, the oldest pending offset or the end, where it moved forward."""
        out = {}
        for partition, record in self._partitions.items():
            offset = next(iter(record.pending)) if record.pending else record.end
            if record.committed is None or offset > record.committed:
                out[partition] = offset
        return out

    def committed(self, offsets: dict[Hashable, int]) -> None:
        """``offsets`` (from ``committable``) were committed."""
        for partition, offset in offsets.items():
            record = self._partitions.get(partition)
            if record is not None:
                record.committed = offset if record.committed is None else max(record.committed, offset)

    def forget(self, partitions: set[Hashable]) -> None:
        """Partitions this consumer no longer owns: their pending tickets no longer move any commit."""
        for partition in partitions:
            self._partitions.pop(partition, None)

    def partitions(self) -> set[Hashable]:
        return set(self._partitions)

    @property
    def pending(self) -> int:
        """Messages read whose rows are not stored yet."""
        return sum(len(r.pending) for r in self._partitions.values())
