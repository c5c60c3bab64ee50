"""The last step of the ingest loop: an acknowledged batch closes its obligations, and safe offsets are committed.

Owns when offsets are committed: right after a batch's write (and its dead letters) was acknowledged, when the
loop is idle (obligations closed without a write, e.g. an OTLP trace skipped, or a commit that failed before),
and never while a rebalance listener commits the revoked partitions itself (``held``); and the gauge saying when
the committed offsets were last as far as the rule allows (``ragmon_ingest_commit_current_timestamp_seconds``: an
OTLP trace waiting for its root holds its messages uncommitted for minutes by design, which is no stall). Which
offsets are safe is the ledger's rule (``offsets.py``). A failed commit is counted and left for the next one:
the offsets stay uncommitted, so the messages are re-read after a crash, never lost. It must not write rows or
dead letters.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Protocol

from opentelemetry.trace import SpanKind

from ragmon.errors import SourceError
from ragmon.pipeline.batcher import Batch
from ragmon.pipeline.metrics import IngestMetrics
from ragmon.pipeline.offsets import OffsetLedger
from ragmon.pipeline.stats import IngestStats
from ragmon.stream.source import Partition
from ragmon.tracing import span

log = logging.getLogger(__name__)


class Committer(Protocol):
    """The part of ``TraceSource`` this step uses: a synchronous commit that raises ``SourceError``."""

    def commit(self, offsets: Mapping[Partition, int]) -> None: ...


class CommitStep:
    """Commits for one consumer. Not thread-safe: the loop thread (the writer thread never commits)."""

    def __init__(self, source: Committer, ledger: OffsetLedger, metrics: IngestMetrics, stats: IngestStats, *,
                 loop: str = "ingest"):
        self._source = source
        self._ledger = ledger
        self._t = metrics
        self._current = metrics.ingest_commit_current.labels(loop)  # per loop: ``ragmon run`` has two
        self._stats = stats
        self._held = False

    def submit(self, batch: Batch) -> None:
        """``batch`` and its dead letters were acknowledged: close its obligations, commit what became safe."""
        batch.release()
        self.commit()

    def commit(self) -> None:
        """Commit every partition whose safe offset moved past the last commit. Never raises."""
        if self._held:
            return
        offsets = self._ledger.committable()
        if not offsets:  # the commit is as far as the rule allows (what is left is held by traces assembling)
            self._current.set(time.time())
            return
        try:
            with span("ragmon.ingest.commit", {"messaging.system": "kafka", "messaging.operation.type": "settle",
                                               "ragmon.commit.partitions": len(offsets)}, kind=SpanKind.CLIENT):
                self._source.commit(offsets)
        except SourceError as exc:
            self._t.ingest_flush_failures.labels("commit", "retryable").inc()
            log.warning("%s; the offsets stay uncommitted and are committed with the next batch", exc)
            return
        self._ledger.mark_committed(offsets)
        self._stats.commits += 1
        now = time.time()
        self._t.ingest_last_commit.set(now)
        self._current.set(now)

    @contextmanager
    def held(self) -> Iterator[None]:
        """No commits inside: the rebalance listener commits the revoked partitions itself, with what the
        revoke handler returns (see ``ragmon.stream.source``)."""
        self._held = True
        try:
            yield
        finally:
            self._held = False
