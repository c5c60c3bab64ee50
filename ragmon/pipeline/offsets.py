"""Which offsets are safe to commit: a per-partition ledger of messages with open obligations.

Owns the commit rule. Every consumed message is ``track``-ed with the number of obligations it still has:
1 for a native trace (stored, or its dead letter acknowledged), or the number of OTLP traces that used its
spans (each stored, or explicitly dropped and counted). ``release_trace`` closes a trace's obligations. The committable
offset of a partition is one past the longest prefix of its messages whose obligations are all closed, so a
commit never passes a message that something still depends on. Pure bookkeeping: no I/O, no clock.
"""

from __future__ import annotations

from collections import deque

from ragmon.stream.source import Partition


class Entry:
    """One consumed message's open obligations."""

    __slots__ = ("partition", "offset", "open", "waiters")

    def __init__(self, partition: Partition, offset: int, open_count: int):
        self.partition = partition
        self.offset = offset
        self.open = open_count
        self.waiters: list[Entry] | None = None


def release(entry: Entry) -> None:
    """Close one obligation of ``entry``; when it reaches zero, close the obligations waiting on it."""
    entry.open -= 1
    if entry.open == 0 and entry.waiters:
        waiters, entry.waiters = entry.waiters, None
        for w in waiters:
            release(w)


def release_trace(entries: list[Entry]) -> None:
    """A trace built from ``entries`` was stored (or dropped): close its obligation on each of them.

    Within a partition the earlier messages of the trace stay open until the LAST one is fully done
    (``waiters``), so the committable prefix never ends inside a resolved trace: a restart re-reads a trace
    wholly or not at all, and a partial re-assembly can never replace a stored complete trace.
    """
    if len(entries) == 1:
        release(entries[0])
        return
    by_partition: dict[Partition, list[Entry]] = {}
    for e in entries:
        by_partition.setdefault(e.partition, []).append(e)
    for group in by_partition.values():
        group.sort(key=lambda e: e.offset)
        last = group[-1]
        if len(group) > 1:
            if last.waiters is None:
                last.waiters = []
            last.waiters.extend(group[:-1])
        release(last)


class OffsetLedger:
    """Per-partition queues of ``Entry`` in offset order. Not thread-safe (one pipeline thread)."""

    def __init__(self) -> None:
        self._queues: dict[Partition, deque[Entry]] = {}
        self._done: dict[Partition, int] = {}        # next offset after the closed prefix
        self._committed: dict[Partition, int] = {}   # last offset handed to a successful commit

    def track(self, partition: Partition, offset: int, open_count: int) -> Entry:
        entry = Entry(partition, offset, open_count)
        if open_count <= 0 and not self._queues.get(partition):
            self._done[partition] = offset + 1      # nothing pending in front of it: done already
        else:
            self._queues.setdefault(partition, deque()).append(entry)
        return entry

    def committable(self) -> dict[Partition, int]:
        """Partitions whose safe offset advanced past the last commit: {partition: next offset to read}."""
        for part, queue in self._queues.items():
            while queue and queue[0].open <= 0:
                self._done[part] = queue.popleft().offset + 1
        return {p: o for p, o in self._done.items() if o > self._committed.get(p, -1)}

    def mark_committed(self, offsets: dict[Partition, int]) -> None:
        for p, o in offsets.items():
            self._committed[p] = max(o, self._committed.get(p, -1))

    def pending(self) -> int:
        """Messages not yet safe to commit (for tests and the shutdown log)."""
        return sum(len(q) for q in self._queues.values())

    def partitions(self) -> set[Partition]:
        return set(self._queues) | set(self._done)

    def forget(self, partitions: set[Partition]) -> None:
        """Drop the partitions' state (they were revoked; whoever owns them next re-reads from the commit)."""
        for p in partitions:
            self._queues.pop(p, None)
            self._done.pop(p, None)
            self._committed.pop(p, None)
