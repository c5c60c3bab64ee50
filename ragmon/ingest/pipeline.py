"""The ingest loop: poll → decode → redact → batch → write (retry, backpressure) → dead letters → commit.

Owns the delivery semantics. Offsets are committed only for messages whose obligations are closed (see
``offsets.py``): a native trace once the store acknowledged its batch, an invalid message once its dead letter
was acknowledged, an OTLP message once every trace that used its spans was stored or explicitly dropped.
Writes are idempotent (insert deduplication token + ReplacingMergeTree), so a crash anywhere replays at most
the uncommitted tail, which collapses under FINAL: every valid trace stored exactly once.

Backpressure: while a batch cannot be written (store down) or its dead letters cannot be produced, the
source is paused, the batch is retried with bounded exponential backoff and jitter (interruptible by
shutdown), and nothing new is read: memory stays bounded by one batch. It must not talk to Kafka or
ClickHouse directly (``TraceSource``, ``TraceWriter``, ``DeadLetterSink`` do).
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

from opentelemetry.trace import SpanKind

from ragmon.config import IngestSettings
from ragmon.errors import RagmonError, SourceError, StoreError
from ragmon.ingest.batcher import Batch, BatchLimits
from ragmon.ingest.dead_letter import DeadLetterSink
from ragmon.ingest.faults import FaultPoints
from ragmon.ingest.intake import Intake
from ragmon.ingest.offsets import OffsetLedger
from ragmon.ingest.source import Partition, RawMessage, TraceSource
from ragmon.ingest.writer import TraceWriter
from ragmon.telemetry import Telemetry
from ragmon.tracing import span

log = logging.getLogger("ragmon.ingest")

@dataclass
class IngestStats:
    """What the loop did (for tests, the shutdown log and the benchmark)."""

    consumed: int = 0
    stored: int = 0
    dead_letters: Counter[str] = field(default_factory=Counter)
    batches: int = 0
    retries: int = 0
    commits: int = 0
    revocations: int = 0
    first_data_at: float | None = None   # wall-clock time the first message arrived
    last_write_at: float | None = None   # wall-clock time of the last acknowledged write
    first_data_cpu: float | None = None  # process CPU seconds (all threads) at first_data_at
    last_write_cpu: float | None = None  # process CPU seconds at last_write_at (the benchmark's CPU per trace)


class IngestPipeline:
    """One consumer's ingest loop. ``run(stop)`` blocks until ``stop`` is set; not thread-safe otherwise."""

    name = "ingest"

    def __init__(self, source: TraceSource, writer: TraceWriter, dead_letters: DeadLetterSink,
                 settings: IngestSettings, telemetry: Telemetry, *, input_format: str = "auto",
                 retention_days: int = 90, faults: FaultPoints | None = None, concurrent_writes: bool = True,
                 clock: Callable[[], float] = time.monotonic, rng: random.Random | None = None):
        self.source = source
        self.writer = writer
        self.dead_letters = dead_letters
        self.settings = settings
        self.t = telemetry
        self.faults = faults or FaultPoints()
        self.clock = clock
        self.rng = rng or random.Random()
        self.stats = IngestStats()
        self.ledger = OffsetLedger()
        self.intake = Intake(settings, telemetry, self.ledger, input_format=input_format,
                             retention_days=retention_days, clock=clock)
        self.redactor = self.intake.redactor
        self.assembler = self.intake.assembler
        self._limits = BatchLimits(settings.max_batch_rows, settings.max_batch_bytes, settings.flush_interval_seconds)
        self._batch = Batch(self._limits, clock())
        self._sealed: Batch | None = None          # a batch whose write failed, waiting for its retry
        self._inflight: tuple[Batch, Future[None]] | None = None
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="ragmon-ingest-write") if concurrent_writes else None
        self._attempts = 0
        self._retry_at = 0.0
        self._paused = False
        self._stop = threading.Event()
        self._next_lag = 0.0
        self._in_revoke = False
        self.last_poll = clock()
        self.last_error: str | None = None
        self.last_lag: dict[Partition, int] = {}
        self._lag_complete = False
        self._lag_series: set[Partition] = set()  # partitions with a consumer-lag series on /metrics
        source.set_revoke_handler(self._on_revoke)

    # -- the loop ---------------------------------------------------------------------------------------------

    def run(self, stop: threading.Event) -> IngestStats:
        self._stop = stop
        try:
            while not stop.is_set():
                self.step()
        finally:
            self.shutdown()
        return self.stats

    def step(self) -> None:
        """One iteration: collect a finished write, retry a failed one, or poll and process; write when due."""
        now = self.clock()
        self._collect(block=False)
        if self._sealed is not None:
            if now < self._retry_at:
                self._poll(min(self._retry_at - now, 0.25))  # paused: keeps group membership, returns nothing
                return
            if not self._flush(self._sealed):
                return
        for msg in self._poll(self._poll_timeout(now)):
            self.intake.handle(msg, self._batch)  # every polled message is handled, even past a failure: its offset is consumed
            if self._batch.full() and self._sealed is None:
                self._dispatch()
        now = self.clock()
        self.intake.expire(now, self._batch)
        if self._sealed is None and self._batch.due(now):
            self._dispatch()
        elif self._sealed is None and self._inflight is None and self._batch.empty:
            self._commit()
        if now >= self._next_lag:
            self._next_lag = now + 2.0
            self._update_lag()

    def _poll_timeout(self, now: float) -> float:
        """How long a poll may block: until the open batch is due, and never more than 0.25 s (expiry of OTLP
        traces, lag readings). With nothing buffered there is nothing to flush, so an idle loop blocks in the
        poll instead of spinning."""
        if self._batch.empty:
            return 0.25
        return max(0.0, min(0.25, self._limits.max_wait_seconds - (now - self._batch.opened_at)))

    def drain(self) -> None:
        """Wait for the write in flight, if any, and account for it (tests, shutdown, rebalance)."""
        self._collect(block=True)

    def shutdown(self) -> None:
        """Flush what is buffered (one attempt within the grace period), commit, close. Never raises."""
        try:
            self._collect(block=True)
            if self._sealed is not None:
                self._flush(self._sealed)
            if self._sealed is None and not self._batch.empty:
                self._flush(self._seal())
            if self._sealed is not None:
                log.warning("shutdown with an unwritten batch of %d traces: not committed, will be re-read",
                            len(self._sealed))
            pending = self.assembler.pending()
            if pending:
                log.info("shutdown with %d OTLP traces still assembling: their offsets stay uncommitted", pending)
        except Exception:  # noqa: BLE001 - shutdown must finish
            log.exception("error while flushing at shutdown")
        finally:
            if self._executor is not None:
                self._executor.shutdown(wait=True)
            for closer in (self.source.close, self.dead_letters.close):
                try:
                    closer()
                except Exception:  # noqa: BLE001
                    log.exception("error while closing")

    @property
    def paused(self) -> bool:
        """True while consumption is paused because a batch could not be written."""
        return self._paused

    def idle(self) -> bool:
        """Nothing buffered, nothing waiting for a write, every consumed offset committed."""
        return (self._sealed is None and self._inflight is None and self._batch.empty
                and self.assembler.pending() == 0
                and self.ledger.pending() == 0 and not self.ledger.committable())

    # -- per message ------------------------------------------------------------------------------------------

    def _poll(self, timeout: float) -> list[RawMessage]:
        try:
            msgs = self.source.poll(timeout, self.settings.max_batch_rows)
        except SourceError as exc:
            self.last_error = str(exc)
            log.warning("%s; retrying", exc)
            self._stop.wait(min(1.0, timeout) or 0.1)
            msgs = []
        self.last_poll = self.clock()
        self.t.ingest_last_poll.set(time.time())
        if msgs:
            if self.stats.first_data_at is None:
                self.stats.first_data_at = time.time()
                self.stats.first_data_cpu = time.process_time()
            self.stats.consumed += len(msgs)
            by_topic = Counter(m.topic for m in msgs)
            for topic, n in by_topic.items():
                self.t.ingest_messages_consumed.labels(topic).inc(n)
        return msgs

    # -- writing ----------------------------------------------------------------------------------------------

    def _seal(self) -> Batch:
        batch, self._batch = self._batch, Batch(self._limits, self.clock())
        self._attempts = 0
        return batch

    def _dispatch(self) -> None:
        """Write the open batch: in the writer thread (one in flight at most: memory is bounded by two
        batches), so decoding the next batch overlaps the insert; or inline without ``concurrent_writes``."""
        if not self._collect(block=True):
            return  # the previous write failed: it is retried first, this batch keeps buffering meanwhile
        batch = self._seal()
        if self._executor is None:
            self._flush(batch)
        else:
            self._inflight = (batch, self._executor.submit(self._write, batch))

    def _collect(self, *, block: bool) -> bool:
        """Account for the write in flight once it finished. False while it runs or when it failed."""
        if self._inflight is None:
            return True
        batch, future = self._inflight
        if not block and not future.done():
            return False
        self._inflight = None
        try:
            future.result()
        except Exception as exc:  # noqa: BLE001 - a failing write never kills the loop (see _failed)
            self._failed(batch, exc)
            return False
        self._finish(batch)
        return True

    def _flush(self, batch: Batch) -> bool:
        """Write the batch and its dead letters now, then commit. On failure pause and schedule a retry."""
        try:
            self._write(batch)
        except Exception as exc:  # noqa: BLE001 - a failing write never kills the loop (see _failed)
            self._failed(batch, exc)
            return False
        self._finish(batch)
        return True

    def _failed(self, batch: Batch, exc: Exception) -> None:
        """Keep the batch for a retry. An exception nobody classified is a bug: logged with its traceback and
        treated as permanent (retried at the longest backoff, nothing committed), never allowed to end the loop."""
        self._sealed = batch
        if not isinstance(exc, RagmonError):
            log.error("unexpected error while writing a batch", exc_info=exc)
            exc = StoreError(f"unexpected {type(exc).__name__}: {exc}")
        self._backoff(exc, "dead_letter" if isinstance(exc, SourceError) else "store")

    def _write(self, batch: Batch) -> None:
        """Insert the rows (once), then produce the dead letters (once). Raises; may run in the writer thread."""
        if not batch.stored and len(batch):
            token = batch.dedup_token()
            self.faults.hit("before_insert", rows=len(batch), token=token)
            started = time.perf_counter()
            with span("ragmon.ingest.insert", {
                "db.system.name": "clickhouse", "db.operation.name": "INSERT", "db.collection.name": "traces",
                "ragmon.batch.traces": len(batch), "ragmon.batch.bytes": batch.bytes,
                "ragmon.batch.partitions": len(batch.ranges),
            }, kind=SpanKind.CLIENT):
                self.faults.hit("during_insert", rows=len(batch), token=token)
                self.writer.write(batch.rows, token)
            self.t.ingest_write_seconds.observe(time.perf_counter() - started)
            self.t.ingest_batch_rows.observe(len(batch))
            self.t.ingest_traces_stored.inc(len(batch))
            self.stats.stored += len(batch)
            self.stats.batches += 1
            self.stats.last_write_at = time.time()
            self.stats.last_write_cpu = time.process_time()
            batch.stored = True
            self.faults.hit("after_insert", rows=len(batch), token=token)
        if not batch.dead_letters_sent and batch.dead_letters:
            reasons = Counter(d.reason for d in batch.dead_letters)
            with span("ragmon.ingest.dead_letters", {
                "messaging.system": "kafka", "messaging.operation.type": "send",
                "messaging.batch.message_count": len(batch.dead_letters),
                "ragmon.dead_letter.reasons": sorted(reasons),
            }, kind=SpanKind.PRODUCER):
                self.dead_letters.send(batch.dead_letters)
            batch.dead_letters_sent = True
            for reason, n in reasons.items():
                self.t.ingest_dead_letters.labels(reason).inc(n)
                self.stats.dead_letters[reason] += n

    def _finish(self, batch: Batch) -> None:
        """The batch is acknowledged: close its obligations, resume if paused, commit what became safe."""
        for pattern, n in self.redactor.take_counts().items():
            self.t.ingest_redactions.labels(pattern).inc(n)
        batch.release()
        if self._sealed is batch:
            self._sealed = None
        self._attempts = 0
        if self._paused:
            self._paused = False
            self.source.resume()
            self.t.ingest_paused.set(0)
            log.info("write succeeded again: consumption resumed")
        self._commit()

    def _backoff(self, exc: RagmonError, stage: str) -> None:
        self._attempts += 1
        self.stats.retries += 1
        self.last_error = str(exc)
        self.t.ingest_store_retries.inc()
        self.t.ingest_flush_failures.labels(stage, "retryable" if exc.retryable else "permanent").inc()
        cap = self.settings.store_retry_max_seconds
        base = cap if not exc.retryable else min(cap, 0.1 * 2 ** min(self._attempts, 20))
        delay = base / 2 + self.rng.uniform(0, base / 2)
        self._retry_at = self.clock() + delay
        if not self._paused:
            self._paused = True
            self.source.pause()
            self.t.ingest_paused.set(1)
        log.warning("%s write failed (%s, attempt %d): consumption paused, retrying in %.2fs", stage, exc,
                    self._attempts, delay)

    def _commit(self) -> None:
        if self._in_revoke:  # the rebalance listener commits the revoked partitions itself
            return
        offsets = self.ledger.committable()
        if not offsets:
            return
        try:
            with span("ragmon.ingest.commit", {"messaging.system": "kafka", "messaging.operation.type": "settle",
                                               "ragmon.commit.partitions": len(offsets)}, kind=SpanKind.CLIENT):
                self.source.commit(offsets)
        except SourceError as exc:
            self.t.ingest_flush_failures.labels("commit", "retryable").inc()
            log.warning("%s; the offsets stay uncommitted and are committed with the next batch", exc)
            return
        self.ledger.mark_committed(offsets)
        self.stats.commits += 1
        self.t.ingest_last_commit.set(time.time())

    def caught_up(self) -> bool:
        """Partitions are assigned and the last lag reading (every 5 s) was zero on each (for --exit-when-idle)."""
        return self._lag_complete and bool(self.last_lag) and not any(self.last_lag.values())

    def _update_lag(self) -> None:
        try:
            self.last_lag = self.source.lag()
            assigned = self.source.assignment()
            self._lag_complete = set(self.last_lag) == assigned
            for (topic, part), lag in self.last_lag.items():
                self.t.ingest_consumer_lag.labels(topic, str(part)).set(lag)
                self._lag_series.add((topic, part))
            self._drop_lag_series(self._lag_series - assigned)
        except Exception as exc:  # noqa: BLE001 - a metric must never stop the loop
            log.debug("lag update failed: %s", exc)

    def _drop_lag_series(self, parts: set[Partition]) -> None:
        """Stop exporting the lag of partitions this replica no longer owns: a frozen value left behind after a
        rebalance would win ``max by (topic, partition)`` in the alert rules and page for a drained partition."""
        for topic, part in parts & self._lag_series:
            self.t.ingest_consumer_lag.remove(topic, str(part))
            self._lag_series.discard((topic, part))

    # -- rebalance --------------------------------------------------------------------------------------------

    def _on_revoke(self, parts: set[Partition]) -> dict[Partition, int]:
        """Called from inside ``source.poll``: flush once; commit what is safe; otherwise leave it uncommitted.

        Assumes the eager protocol (every partition is revoked at once): when the flush fails, the whole
        buffer is dropped and every partition's state forgotten; all of it is re-read from the committed offsets.
        """
        self._in_revoke = True
        try:
            return self._revoke(parts)
        finally:
            self._in_revoke = False

    def _revoke(self, parts: set[Partition]) -> dict[Partition, int]:
        self.stats.revocations += 1
        self._collect(block=True)
        ok = True
        if self._sealed is not None:
            ok = self._flush(self._sealed)
        if ok and not self._batch.empty:
            ok = self._flush(self._seal())
        offsets = {p: o for p, o in self.ledger.committable().items() if p in parts} if ok else {}
        if not ok:  # the store is down: drop the buffered rows; the partitions' next owner re-reads them
            log.warning("partitions %s revoked while the store is failing: buffered traces dropped, not committed",
                        sorted(parts))
            self._sealed = None
            self._batch = Batch(self._limits, self.clock())
            parts = parts | self.ledger.partitions()
            if self._paused:  # nothing is buffered any more; the re-read batch will pause again if need be
                self._paused = False
                self.source.resume()
                self.t.ingest_paused.set(0)
        self.assembler.forget(parts)
        self.ledger.forget(parts)
        self._drop_lag_series(parts)
        return offsets
