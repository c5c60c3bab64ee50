"""The writing step of the ingest loop: a batch's rows into the store, then its dead letters, one write in flight.

Owns: the writer thread (one write in flight, so decoding the next batch overlaps the insert while memory
stays bounded by two batches; inline writes without ``concurrent``), keeping a failed batch for its retry on
the ``Backoff`` schedule, the insert's and the dead letters' telemetry and spans, and exporting the redaction
and permission-leak counts once a batch is stored (leaks once per trace: before a batch's first write it asks
the writer which of its leaking traces are stored already — a re-delivery — and counts only what they add). Each part of
a batch is written once: a retry after the insert succeeded only produces the dead letters. A failing write never ends
the loop: an exception nobody classified is logged with its traceback and treated as permanent. An acknowledged batch
goes to the next step (the commit). It must not poll, pause or commit: the loop pauses the source while ``blocked``.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Protocol

from opentelemetry.trace import SpanKind

from ragmon.errors import RagmonError, SourceError, StoreError
from ragmon.pipeline.batcher import Batch
from ragmon.pipeline.faults import FaultPoints
from ragmon.pipeline.metrics import IngestMetrics
from ragmon.pipeline.stats import IngestStats
from ragmon.pipeline.writer import TraceWriter
from ragmon.store.trace_json import LeakRow
from ragmon.stream.backoff import Backoff
from ragmon.stream.dead_letter import DeadLetterSink
from ragmon.tracing import span

log = logging.getLogger(__name__)


class AcknowledgedSink(Protocol):
    """The step after writing (the commit): takes a batch whose rows and dead letters were acknowledged."""

    def submit(self, batch: Batch) -> None: ...


def new_leaks(rows: Iterable[LeakRow], before: Mapping[str, int]) -> dict[tuple[str, str, str], int]:
    """The leaked chunks these traces add to what the store held: a trace counts once however often it is
    delivered (in earlier batches or twice in this one), and a new version of it only with the leaks it adds.
    By the counter's labels (retriever, variant, stratum)."""
    most: dict[str, LeakRow] = {}
    for r in rows:
        if r.trace_id not in most or r.leaks > most[r.trace_id].leaks:
            most[r.trace_id] = r
    out: dict[tuple[str, str, str], int] = {}
    for trace_id, r in most.items():
        added = r.leaks - before.get(trace_id, 0)
        if added > 0:
            out[r.labels] = out.get(r.labels, 0) + added
    return out


class WriteStep:
    """Writes batches for one consumer. Called from the loop thread; the write itself may run in the writer thread."""

    def __init__(self, writer: TraceWriter, dead_letters: DeadLetterSink, next_step: AcknowledgedSink, *,
                 backoff: Backoff, metrics: IngestMetrics, stats: IngestStats, faults: FaultPoints,
                 redaction_counts: Callable[[], Mapping[str, int]], concurrent: bool,
                 on_insert: Callable[[float], None] | None = None):
        self._writer = writer
        self._dead_letters = dead_letters
        self._next = next_step
        self._backoff = backoff
        self._t = metrics
        self._stats = stats
        self._faults = faults
        self._redaction_counts = redaction_counts
        self._on_insert = on_insert  # told each acknowledged insert's seconds (the adaptive flush wait)
        self._waiting: Batch | None = None                     # a batch whose write failed, waiting for its retry
        self._inflight: tuple[Batch, Future[None]] | None = None
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="ragmon-ingest-write") if concurrent else None

    @property
    def blocked(self) -> bool:
        """A failed batch waits for its retry: nothing else is written meanwhile, and the loop pauses the source."""
        return self._waiting is not None

    @property
    def idle(self) -> bool:
        """Nothing in flight, nothing waiting for a retry."""
        return self._waiting is None and self._inflight is None

    @property
    def waiting_rows(self) -> int:
        """Traces in the batch waiting for its retry (0 when none is)."""
        return len(self._waiting) if self._waiting is not None else 0

    def retry_in(self) -> float:
        """Seconds until the waiting batch's retry is due."""
        return self._backoff.remaining()

    def submit(self, batch: Batch) -> bool:
        """Start writing ``batch``: in the writer thread once the write in flight finished, or inline. False
        (``batch`` not taken) while a failed batch waits: it is retried first, ``batch`` keeps buffering."""
        if self._waiting is not None or not self.collect(block=True):
            return False
        if self._executor is None:
            self.write_now(batch)
        else:
            self._inflight = (batch, self._executor.submit(self._write, batch))
        return True

    def poll(self) -> None:
        """Account for a finished write; retry the waiting batch once its backoff ran out."""
        self.collect(block=False)
        if self._waiting is not None and self._backoff.remaining() <= 0:
            self.write_now(self._waiting)

    def collect(self, *, block: bool) -> bool:
        """Account for the write in flight once it finished. False while it runs or when it failed."""
        if self._inflight is None:
            return True
        batch, future = self._inflight
        if not block and not future.done():
            return False
        self._inflight = None
        return self._settle(batch, future.result)

    def retry_now(self) -> bool:
        """Write the waiting batch now, whatever its schedule (shutdown, rebalance). True when none is left."""
        return self._waiting is None or self.write_now(self._waiting)

    def write_now(self, batch: Batch) -> bool:
        """Write ``batch`` in this thread; on failure keep it for its retry. True when it was acknowledged."""
        return self._settle(batch, lambda: self._write(batch))

    def discard(self) -> Batch | None:
        """Forget the waiting batch and return it (its partitions were revoked; their next owner re-reads it)."""
        batch, self._waiting = self._waiting, None
        self._backoff.reset()
        return batch

    def close(self) -> None:
        """Stop the writer thread once the write in flight, if any, returned."""
        if self._executor is not None:
            self._executor.shutdown(wait=True)

    # -- one write ----------------------------------------------------------------------------------------------

    def _write(self, batch: Batch) -> None:
        """Insert the rows (once), then produce the dead letters (once). Raises; may run in the writer thread."""
        if not batch.stored and len(batch):
            token = batch.dedup_token()
            if batch.leaks_before is None:  # once, before the first attempt: a retry would find its own rows
                batch.leaks_before = self._writer.stored_leaks(batch.rows.leaking) if batch.rows.leaking else {}
            self._faults.hit("before_insert", rows=len(batch), token=token)
            batch.stamp()  # ingested_at: when the rows are written, not when the batch opened
            started = time.perf_counter()
            with span("ragmon.ingest.insert", {
                "db.system.name": "clickhouse", "db.operation.name": "INSERT", "db.collection.name": "traces",
                "ragmon.batch.traces": len(batch), "ragmon.batch.bytes": batch.bytes,
                "ragmon.batch.partitions": len(batch.ranges),
            }, kind=SpanKind.CLIENT):
                self._faults.hit("during_insert", rows=len(batch), token=token)
                self._writer.write(batch.rows, token)
            t, stats = self._t, self._stats
            took = time.perf_counter() - started
            t.ingest_write_seconds.observe(took)
            if self._on_insert is not None:
                self._on_insert(took)
            t.ingest_batch_rows.observe(len(batch))
            t.ingest_traces_stored.inc(len(batch))
            for kind, n in batch.settles_stored.items():
                t.ingest_traces_settled.labels(kind, "stored").inc(n)
            stats.stored += len(batch)
            stats.batches += 1
            stats.last_write_at = time.time()
            stats.last_write_cpu = time.process_time()
            batch.stored = True
            self._faults.hit("after_insert", rows=len(batch), token=token)
        if not batch.dead_letters_sent and batch.dead_letters:
            reasons = Counter(d.reason for d in batch.dead_letters)
            with span("ragmon.ingest.dead_letters", {
                "messaging.system": "kafka", "messaging.operation.type": "send",
                "messaging.batch.message_count": len(batch.dead_letters),
                "ragmon.dead_letter.reasons": sorted(reasons),
            }, kind=SpanKind.PRODUCER):
                delivered = self._dead_letters.send(batch.dead_letters)
            batch.dead_letters_sent = True
            for kind, n in batch.settles_dead_lettered.items():
                self._t.ingest_traces_settled.labels(kind, "dead_lettered").inc(n)
            for reason, n in Counter(d.reason for d in delivered).items():  # a letter cut to fit: too_large
                self._t.ingest_dead_letters.labels(reason).inc(n)
                self._stats.dead_letters[reason] += n
            cut = sum(d.cut for d in delivered)
            if cut:
                self._t.ingest_dead_letters_cut.inc(cut)

    def _settle(self, batch: Batch, write: Callable[[], object]) -> bool:
        """Run (or wait for) ``batch``'s write and account for it: hand it on, or keep it for its retry."""
        try:
            write()
        except Exception as exc:  # noqa: BLE001 - a failing write never kills the loop (see _failed)
            self._failed(batch, exc)
            return False
        self._finish(batch)
        return True

    def _finish(self, batch: Batch) -> None:
        """The batch is acknowledged: export the redaction counts, reset the schedule, hand the batch on."""
        for pattern, n in self._redaction_counts().items():
            self._t.ingest_redactions.labels(pattern).inc(n)
        if batch.rows.leaking:  # the stored rows carry the per-trace counts; on-call lists them from there
            new = new_leaks(batch.rows.leaking, batch.leaks_before or {})
            for labels, n in new.items():
                self._t.permission_leaks.labels(*labels).inc(n)
            if new:
                log.warning("permission leaks: %d chunk(s) of another tenant in this batch (%s); list the traces "
                            "with `ragmon leaks list`", sum(new.values()),
                            ", ".join(f"{r} {v} {s or '-'}" for r, v, s in sorted(new)))
            else:
                log.info("permission leaks: %d trace(s) delivered again, counted when first stored",
                         len({r.trace_id for r in batch.rows.leaking}))
        if self._waiting is batch:
            self._waiting = None
        self._backoff.reset()
        self._next.submit(batch)

    def _failed(self, batch: Batch, exc: Exception) -> None:
        """Keep the batch for a retry. An exception nobody classified is a bug: logged with its traceback and
        treated as permanent (retried at the longest backoff, nothing committed), never allowed to end the loop."""
        self._waiting = batch
        if not isinstance(exc, RagmonError):
            log.error("unexpected error while writing a batch", exc_info=exc)
            exc = StoreError(f"unexpected {type(exc).__name__}: {exc}")
        stage = "dead_letter" if isinstance(exc, SourceError) else "store"
        self._stats.retries += 1
        self._stats.last_error = str(exc)
        self._t.ingest_store_retries.inc()
        self._t.ingest_flush_failures.labels(stage, "retryable" if exc.retryable else "permanent").inc()
        delay = self._backoff.failed(exc.retryable)
        log.warning("%s write failed (%s, attempt %d): consumption paused, retrying in %.2fs", stage, exc,
                    self._backoff.attempts, delay)
