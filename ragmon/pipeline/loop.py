"""The ingest loop: poll → intake → batch → write (one in flight) → commit, composed of steps.

Owns the loop and what only the loop can decide: polling the source, pausing it while a write fails
(backpressure), the rebalance handler, and shutdown. Each step knows only the next one::

    source.poll ──► Intake.handle ──► BatchStep ──► WriteStep ──► CommitStep
    (this loop)     intake.py         batcher.py    write_step.py  commit_step.py

Offsets are committed only for messages whose obligations are closed (see ``offsets.py``): a native trace once
the store acknowledged its batch, an invalid message once its dead letter was acknowledged, an OTLP message once
every trace that used its spans was stored or explicitly dropped. Writes are idempotent (insert deduplication
token + ReplacingMergeTree), so a crash anywhere replays at most the uncommitted tail, which collapses under
FINAL: every valid trace stored exactly once.

Backpressure: while a batch cannot be written (store down) or its dead letters cannot be produced, the source
is paused and the batch is retried on the ``Backoff`` schedule; the loop keeps polling (nothing comes back from
a paused source) so group membership survives and shutdown interrupts the wait, and memory stays bounded by
one batch. A source that can never be read as it is (``FatalSourceError``: a codec's library missing) ends the
loop: what is buffered is written and committed, and ``fatal_error`` says why. Every source re-reads what is not
committed (Kafka, the OTLP/HTTP spool, a file run again), so OTLP traces still assembling at shutdown are left
uncommitted and counted ``released``; an input that has ended (``exhausted``: a file read to its end) can send no
more spans, so what is still assembling is emitted at once. Consumer lag is reported by ``ragmon.stream.lag``;
after each step the loop publishes its ``ConsumerState`` (for ``--exit-when-idle``). It must not talk to Kafka or
ClickHouse directly (``TraceSource``, ``TraceWriter``, ``DeadLetterSink`` do).
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections import Counter
from collections.abc import Callable

from ragmon.config import IngestSettings
from ragmon.daemon import ConsumerState
from ragmon.errors import FatalSourceError, SourceError
from ragmon.metrics.permissions import LeakRule
from ragmon.pipeline.batcher import Batch, BatchLimits, BatchStep, FlushWait
from ragmon.pipeline.commit_step import CommitStep
from ragmon.pipeline.faults import FaultPoints
from ragmon.pipeline.intake import Intake
from ragmon.pipeline.metrics import IngestMetrics
from ragmon.pipeline.offsets import OffsetLedger
from ragmon.pipeline.stats import IngestStats
from ragmon.pipeline.write_step import WriteStep
from ragmon.pipeline.writer import TraceWriter
from ragmon.stream.backoff import Backoff
from ragmon.stream.dead_letter import DeadLetterSink
from ragmon.stream.lag import LagReporter
from ragmon.stream.source import Partition, RawMessage, TraceSource
from ragmon.telemetry import Telemetry

__all__ = ["IngestPipeline", "IngestStats"]

log = logging.getLogger(__name__)

#: the longest a poll blocks: OTLP traces expire and lag is read between polls
MAX_POLL_SECONDS = 0.25


class IngestPipeline:
    """One consumer's ingest loop. ``run(stop)`` blocks until ``stop`` is set; not thread-safe otherwise."""

    def __init__(self, source: TraceSource, writer: TraceWriter, dead_letters: DeadLetterSink,
                 settings: IngestSettings, telemetry: Telemetry, *, input_format: str = "auto",
                 retention_days: int = 90, faults: FaultPoints | None = None, concurrent_writes: bool = True,
                 clock: Callable[[], float] = time.monotonic, rng: random.Random | None = None, name: str = "ingest"):
        self.name = name  # the loop's name: "otlp" beside the Kafka ingest loop of ``ragmon run``
        self.source = source
        self.settings = settings
        self.clock = clock
        #: the trace loop's metrics, registered on the process's telemetry when the first loop is built
        self._t = metrics = telemetry.use(IngestMetrics)
        self._dead_letters = dead_letters
        self.stats = IngestStats()
        self.ledger = OffsetLedger()
        self.intake = Intake(settings, metrics, self.ledger, input_format=input_format,
                             retention_days=retention_days, clock=clock)
        self.commits = CommitStep(source, self.ledger, metrics, self.stats, loop=name)
        self._open_traces = metrics.ingest_otlp_open_traces.labels(name)
        wait = FlushWait(settings.flush_interval_seconds, settings.freshness_target_seconds)
        self.writes = WriteStep(
            writer, dead_letters, self.commits, metrics=metrics, stats=self.stats,
            backoff=Backoff(settings.store_retry_max_seconds, clock=clock, rng=rng or random.Random()),
            faults=faults or FaultPoints(), redaction_counts=self.intake.take_redaction_counts,
            concurrent=concurrent_writes, on_insert=wait.observe)
        limits = BatchLimits(settings.max_batch_rows, settings.max_batch_bytes, settings.flush_interval_seconds)
        self.batches = BatchStep(limits, self.writes, clock, wait, leak_rule=LeakRule.sharing(settings.shared_tenants))
        self.lag = LagReporter(source, metrics.ingest_consumer_lag)
        #: this loop's progress at the end of its last step, for ``--exit-when-idle`` (read from another thread)
        self.consumer_state = ConsumerState()
        self._paused = False
        self._stop = threading.Event()
        #: why the loop ended on its own: the source cannot be read and no retry would change that
        self.fatal_error: FatalSourceError | None = None
        self.last_poll = clock()
        source.set_revoke_handler(self._on_revoke)

    # -- the loop ---------------------------------------------------------------------------------------------

    def run(self, stop: threading.Event, *, until: Callable[[], bool] | None = None) -> IngestStats:
        """Loop until ``stop`` is set, ``until()`` is true (checked after each step), or the source fails for good."""
        self._stop = stop
        try:
            while not stop.is_set() and not (until is not None and until()):
                self.step()
        except FatalSourceError as exc:
            self.fatal_error = exc
            self.stats.last_error = str(exc)
            log.error("ingest stops: %s", exc)
        finally:
            self.shutdown()
        return self.stats

    def step(self) -> None:
        """One iteration: collect a finished write or retry a failed one; poll, decode and batch; write when due."""
        writes, batches = self.writes, self.batches
        writes.poll()
        if writes.blocked:  # paused: the poll keeps group membership and returns nothing
            self._poll(min(writes.retry_in(), MAX_POLL_SECONDS))
            self.consumer_state = ConsumerState(self.stats.consumed, False, self.lag.assigned(), False)
            return
        # with nothing buffered there is nothing to flush: an idle loop blocks in the poll instead of spinning
        msgs = self._poll(min(MAX_POLL_SECONDS, batches.wait_seconds(self.clock())))
        if msgs:  # every polled message is handled, even past a failed write: its offset is consumed
            batches.submit(self.intake.handle(msgs))
        now = self.clock()
        batches.submit(self.intake.expire(now))
        if self.intake.pending() and getattr(self.source, "exhausted", False):
            batches.submit(self.intake.flush())  # the input ended: no more spans can come
        self._open_traces.set(self.intake.open_traces())
        if not writes.blocked:
            if batches.due(now):
                batches.hand_on()
            elif writes.idle and batches.empty:
                self.commits.commit()  # obligations closed without a write (dropped OTLP traces), or a failed commit
        self._follow_writes()
        self.lag.maybe_update(now)
        self.consumer_state = ConsumerState(self.stats.consumed, self.idle(), self.lag.assigned(),
                                            self.lag.caught_up())

    def drain(self) -> None:
        """Wait for the write in flight, if any, and account for it (tests, shutdown, rebalance)."""
        self.writes.collect(block=True)

    def shutdown(self) -> None:
        """Flush what is buffered (one attempt within the grace period), commit, close. Never raises."""
        try:
            if not self._write_everything():
                log.warning("shutdown with an unwritten batch of %d traces: not committed, will be re-read",
                            self.writes.waiting_rows)
                self._give_back(self.writes.discard())
                self._give_back(self.batches.discard())
            pending = self.intake.pending()
            if pending:
                log.info("shutdown with %d OTLP traces still assembling: their messages stay uncommitted and are "
                         "re-read on the next start", pending)
            self.intake.close()
            self._open_traces.set(0)
        except Exception:  # noqa: BLE001 - shutdown must finish
            log.exception("error while flushing at shutdown")
        finally:
            self.writes.close()
            for closer in (self.source.close, self._dead_letters.close):
                try:
                    closer()
                except Exception:  # noqa: BLE001
                    log.exception("error while closing")

    def _give_back(self, batch: Batch | None) -> None:
        """``batch`` is dropped unwritten, its messages uncommitted (a stop, or a revocation while writes fail): its
        unsettled traces are given back to the source (counted ``released``; the next reader consumes them again),
        and what it held that is neither stored nor dead-lettered goes in the stats (``ingest --file``'s summary)."""
        if batch is None:
            return
        for kind, n in batch.unsettled().items():
            self._t.ingest_traces_settled.labels(kind, "released").inc(n)
        if not batch.stored:
            self.stats.abandoned_traces += len(batch)
        if not batch.dead_letters_sent:
            self.stats.abandoned_dead_letters.update(d.reason for d in batch.dead_letters)

    @property
    def paused(self) -> bool:
        """True while consumption is paused because a batch could not be written."""
        return self._paused

    @property
    def last_error(self) -> str | None:
        """The last failed poll or write, as a message."""
        return self.stats.last_error

    def idle(self) -> bool:
        """Nothing buffered, nothing waiting for a write, every consumed offset committed."""
        return (self.writes.idle and self.batches.empty and self.intake.pending() == 0
                and self.ledger.pending() == 0 and not self.ledger.committable())

    # -- polling and backpressure -----------------------------------------------------------------------------

    def _poll(self, timeout: float) -> list[RawMessage]:
        self._follow_writes()
        try:
            msgs = self.source.poll(timeout, self.settings.max_batch_rows)
        except FatalSourceError:
            raise
        except SourceError as exc:
            self.stats.last_error = str(exc)
            log.warning("%s; retrying", exc)
            self._stop.wait(min(1.0, timeout) or 0.1)
            msgs = []
        self.last_poll = self.clock()
        self._t.ingest_last_poll.set(time.time())
        if msgs:
            stats = self.stats
            if stats.first_data_at is None:
                stats.first_data_at = time.time()
                stats.first_data_cpu = time.process_time()
            stats.consumed += len(msgs)
            for topic, n in Counter(m.topic for m in msgs).items():
                self._t.ingest_messages_consumed.labels(topic).inc(n)
        return msgs

    def _follow_writes(self) -> None:
        """Backpressure: the source is paused exactly while a failed write waits for its retry (checked before
        every poll, since only a poll would read more)."""
        if self.writes.blocked != self._paused:
            self._set_paused(not self._paused)
            if not self._paused:
                log.info("write succeeded again: consumption resumed")

    def _set_paused(self, paused: bool) -> None:
        self._paused = paused
        if paused:
            self.source.pause()
        else:
            self.source.resume()
        self._t.ingest_paused.set(int(paused))

    def _write_everything(self) -> bool:
        """Write, now and once each, the write in flight, a failed batch and the open batch. False if one failed."""
        writes = self.writes
        writes.collect(block=True)
        if not writes.retry_now():
            return False
        return self.batches.empty or writes.write_now(self.batches.seal())

    # -- rebalance --------------------------------------------------------------------------------------------

    def _on_revoke(self, parts: set[Partition]) -> dict[Partition, int]:
        """Called from inside ``source.poll``: flush once; commit what is safe; otherwise leave it uncommitted.

        Assumes the eager protocol (every partition is revoked at once): when the flush fails, the whole
        buffer is dropped and every partition's state forgotten; all of it is re-read from the committed offsets.
        """
        self.stats.revocations += 1
        with self.commits.held():  # the rebalance listener commits the revoked partitions itself
            ok = self._write_everything()
        offsets = {p: o for p, o in self.ledger.committable().items() if p in parts} if ok else {}
        if not ok:  # the store is down: drop the buffered rows; the partitions' next owner re-reads them
            log.warning("partitions %s revoked while the store is failing: buffered traces dropped, not committed",
                        sorted(parts))
            self._give_back(self.writes.discard())
            self._give_back(self.batches.discard())
            parts = parts | self.ledger.partitions()
            if self._paused:  # nothing is buffered any more; the re-read batch will pause again if need be
                self._set_paused(False)
        self._follow_writes()
        assembling = self.intake.pending()
        self.intake.forget(parts)
        self.stats.abandoned_traces += assembling - self.intake.pending()
        self.ledger.forget(parts)
        self.lag.drop(parts)
        return offsets
