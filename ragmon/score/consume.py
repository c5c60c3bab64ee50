"""The live score loop: poll → decide → judge many at once → store as they finish → commit what is safe.

Owns the order of things between the traces topic and the store. Every record read gets a ledger ticket
(``ragmon.score.ledger``); a sampled trace goes to the judge pool at once and comes back whenever its judgement
is done, in any order. Finished traces are buffered and written together, up to ``max_batch`` or every
``flush_interval_seconds`` (inserts stay large and about one a second, as ClickHouse wants); after each write
the loop commits, per partition, up to the oldest trace whose rows are not stored yet, never past it.

Backpressure: when ``2 × max_in_flight`` sampled traces are waiting for or in a judge call, or a write failed and
waits to be tried again, the loop pauses fetching (and keeps polling, so the group keeps it as a member); memory is
bounded by that window plus one poll of ``max_batch`` records, whatever the backlog on the topic. A write that still
fails as retryable after the scorer's own tries (the store down, its disk full: ClickHouse NOT_ENOUGH_SPACE) is kept
as it was and written again, with the same deduplication key, after a backoff (1 s doubling to 30 s); nothing of it
is committed meanwhile. Only a permanent store error ends the loop. On stop it reads nothing more, waits up to
``drain_seconds`` for judgements in flight, writes what finished, commits what is safe and returns: calls still
running are abandoned uncommitted, and scored again by whoever reads those offsets next (rows are keyed by trace
and fingerprint, so a FINAL read sees each once). After each step the loop publishes its ``ConsumerState``
(records read; settled: nothing judging or waiting to be written, every offset read committed; the lag per
partition from ``ragmon.stream.lag``) for ``--exit-when-idle``, which stops the process from outside. Must not
build its own source or judge.
"""

from __future__ import annotations

import hashlib
import logging
import queue
import random
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from ragmon.daemon import ConsumerState
from ragmon.errors import RetryableSourceError, RetryableStoreError, SourceError
from ragmon.score.ledger import ScoreLedger, Ticket
from ragmon.score.pipeline import BatchResult, LiveScorer, Scoring
from ragmon.stream.lag import LagReporter

log = logging.getLogger(__name__)

Progress = Callable[[int, BatchResult], None]

#: poll timeout while judgements are in flight: finished ones should not wait a whole poll to be written
BUSY_POLL_SECONDS = 0.05
#: the backoff between tries of a write that failed as retryable: from the first to the longest
WRITE_RETRY_SECONDS = (1.0, 30.0)


class ScoreLoop:
    """One run of the loop over one source. Not thread-safe: ``run`` is its only entry point."""

    def __init__(self, scorer: LiveScorer, source: Any, *, max_batch: int, flush_interval_seconds: float,
                 clock: Callable[[], float], progress: Progress | None):
        self.scorer, self.source = scorer, source
        self.max_batch, self.flush_interval = max_batch, flush_interval_seconds
        self.clock, self.progress = clock, progress
        self.window = 2 * scorer.pool.max_in_flight
        self.ledger = ScoreLedger()
        self.total = BatchResult()
        self.read = 0
        self.judging = 0
        self._finished: queue.SimpleQueue[tuple[Scoring, Ticket]] = queue.SimpleQueue()
        self._ready: list[tuple[Scoring, Ticket]] = []
        self._ready_since: float | None = None
        self._dirty = False  # read something whose offset is not committed yet (or its commit failed)
        self._paused = False
        #: a batch whose write failed as retryable: written again as it was (same dedup key) at ``_retry_at``
        self._unwritten: list[tuple[Scoring, Ticket]] | None = None
        self._retry_at = 0.0
        self._retry_delay = 0.0
        #: why the last write failed, while its batch waits to be written again (None: writes succeed)
        self.write_error: str | None = None
        #: the lag per partition (the backlog gauge, ``ConsumerState``); a source without ``lag`` has no reading
        self.lag = LagReporter(source)

    @property
    def busy(self) -> bool:
        """Judgements in flight or rows waiting to be written."""
        return self.judging > 0 or bool(self._ready) or self._unwritten is not None

    def settled(self) -> bool:
        """Nothing judging or waiting to be written, and every offset read is committed."""
        return not self.busy and self.ledger.pending == 0 and not self.ledger.committable()

    def state(self) -> ConsumerState:
        return ConsumerState(self.read, self.settled(), self.lag.assigned(), self.lag.caught_up(), self.write_error)

    def take(self, polled: list[Any]) -> None:
        """Decide each record read and send the sampled ones to the judges."""
        for record in polled:
            ticket = self.ledger.read(record.partition, record.offset)
            self.read += 1
            self._dirty = True
            if record.trace is None:  # not a trace: nothing to write, nothing holds its offset back
                self.ledger.stored(ticket)
                continue
            scoring = self.scorer.decide(record.trace)
            future = self.scorer.start(scoring)
            if future is None or future.done():
                self._finish(scoring, ticket)
            else:
                self.judging += 1
                future.add_done_callback(lambda f, s=scoring, t=ticket: self._finished.put((_settled(f, s), t)))

    def collect(self, wait_seconds: float = 0.0) -> None:
        """Move judgements that finished into the write buffer (waiting up to ``wait_seconds`` for one)."""
        try:
            while True:
                scoring, ticket = self._finished.get(timeout=wait_seconds) if wait_seconds > 0 \
                    else self._finished.get_nowait()
                wait_seconds = 0.0
                self.judging -= 1
                self._finish(scoring, ticket)
        except queue.Empty:
            pass

    def backpressure(self) -> None:
        """Pause fetching while the judges are a full window behind, or a write waits to be tried again; resume
        when they catch up and writes succeed."""
        full = self.judging >= self.window or self._unwritten is not None
        if full != self._paused and hasattr(self.source, "pause"):
            (self.source.pause if full else self.source.resume)()
            self._paused = full

    def due(self, now: float, idle: bool) -> bool:
        """Time to write and commit: a failed write's backoff ran out, a full buffer, the flush interval, or
        nothing else coming."""
        if self._unwritten is not None:
            return now >= self._retry_at
        if self._ready:
            return (len(self._ready) >= self.max_batch or now - (self._ready_since or now) >= self.flush_interval
                    or (idle and self.judging == 0))
        return self._dirty and idle

    def flush(self, *, now: bool = False) -> None:
        """Write the batch that failed before (once its backoff ran out, or ``now``), then the finished traces,
        then commit up to the oldest trace not stored. A write failing as retryable keeps its batch for later."""
        if self._unwritten is not None:
            if not now and self.clock() < self._retry_at:
                return
            if not self._write(self._unwritten):
                return
            self._unwritten = None
        if self._ready:
            done, self._ready, self._ready_since = self._ready, [], None
            if not self._write(done):
                self._unwritten = done
                return
        self._commit()
        if self.progress:
            self.progress(self.read, self.total)

    def _write(self, done: list[tuple[Scoring, Ticket]]) -> bool:
        """Store one batch's rows; False (and the backoff set) when the store fails as retryable."""
        keyed = getattr(self.source, "batch_key", None)  # a source may name a write by its content
        key = keyed(s.item.trace_id for s, _ in done) if keyed is not None else _batch_key(t for _, t in done)
        try:
            result = self.scorer.write([s for s, _ in done], key)
        except RetryableStoreError as exc:
            low, high = WRITE_RETRY_SECONDS
            self._retry_delay = min(high, max(low, self._retry_delay * 2))
            delay = self._retry_delay * (0.5 + random.random() / 2)
            self._retry_at = self.clock() + delay
            self.write_error = str(exc)
            log.warning("score write failed: %s; its %d traces are written again in %.1fs, fetching paused meanwhile "
                        "(nothing of them is committed)", exc, len(done), delay)
            return False
        for _, ticket in done:
            self.ledger.stored(ticket)
        self.total.merge(result)
        if self.write_error is not None:
            log.warning("score writes succeed again; fetching resumes")
        self.write_error, self._retry_delay = None, 0.0
        return True

    def drain(self, seconds: float, heartbeat: Callable[[], None] | None) -> None:
        """On stop: wait up to ``seconds`` for the judgements in flight, then write and commit what is safe."""
        deadline = self.clock() + seconds
        while self.judging > 0:
            left = deadline - self.clock()
            if left <= 0:
                log.warning("stopping with %d judge call(s) still running: abandoned, not committed; they are scored "
                            "again on the next start", self.judging)
                break
            if heartbeat is not None:
                heartbeat()
            self.collect(wait_seconds=min(0.2, left))
        self.flush(now=True)

    def gauges(self, now: float) -> None:
        metrics = self.scorer.metrics
        metrics.score_backlog.labels("read").set(self.judging)
        before = self.lag.last
        self.lag.maybe_update(now)
        if self.lag.last is not before:
            metrics.score_backlog.labels("unread").set(sum(self.lag.last.values()) * self.scorer.sampler.rate)

    def _finish(self, scoring: Scoring, ticket: Ticket) -> None:
        if not self._ready:
            self._ready_since = self.clock()
        self._ready.append((scoring, ticket))

    def _commit(self) -> None:
        if hasattr(self.source, "assignment"):
            self.ledger.forget(self.ledger.partitions() - self.source.assignment())
        offsets = self.ledger.committable()
        if not offsets:
            self._dirty = False
            return
        try:
            self.source.commit(offsets)
        except SourceError as exc:  # partitions moved in a rebalance: their new owner re-scores (rows dedup)
            log.warning("%s; retried when the loop is next idle, or those traces are scored again by the "
                        "partition's new owner", exc)
            return
        self._dirty = False
        self.ledger.committed(offsets)


def consume(scorer: LiveScorer, source: Any, *, stop: threading.Event, max_traces: int | None = None,
            until: Callable[[], bool] | None = None, publish: Callable[[ConsumerState], None] | None = None,
            progress: Progress | None = None, clock: Callable[[], float] = time.monotonic,
            heartbeat: Callable[[], None] | None = None, max_batch: int = 500, flush_interval_seconds: float = 1.0,
            drain_seconds: float = 10.0) -> BatchResult:
    """Poll, judge, store, commit until ``stop`` is set (or ``max_traces`` read and scored, or ``until()`` is true
    after a step: then what was read is judged, stored and committed before it returns).

    ``source`` has ``poll(timeout_seconds) -> [Polled]`` and ``commit({partition: offset})`` (``pause``,
    ``resume``, ``assignment``, ``lag`` and ``batch_key`` — a write's deduplication key from the trace ids it
holds — are used when it has them). ``publish`` is given the loop's
    ``ConsumerState`` after each step. See the module docstring for the order.
    """
    loop = ScoreLoop(scorer, source, max_batch=max_batch, flush_interval_seconds=flush_interval_seconds,
                     clock=clock, progress=progress)
    backoff = 0.5
    while not stop.is_set():
        if heartbeat is not None:
            heartbeat()
        loop.collect()
        loop.backpressure()
        reading = max_traces is None or loop.read < max_traces
        polled: list[Any] = []
        if reading:
            try:
                polled = source.poll(BUSY_POLL_SECONDS if loop.busy else None)
            except RetryableSourceError as exc:
                log.warning("%s; retrying in %.1fs", exc, backoff)
                stop.wait(backoff)
                backoff = min(backoff * 2, 30.0)
                continue
            backoff = 0.5
            loop.take(polled)
        else:
            loop.collect(wait_seconds=BUSY_POLL_SECONDS)
        now = clock()
        loop.gauges(now)
        if loop.due(now, idle=not polled):
            loop.flush()
        if publish is not None:
            publish(loop.state())
        if not reading and loop.judging == 0:
            break
        if until is not None and until():
            break
    loop.drain(drain_seconds if stop.is_set() else float("inf"), heartbeat)
    if publish is not None:
        publish(loop.state())
    return loop.total


def _settled(future: Future[Scoring], scoring: Scoring) -> Scoring:
    """The finished ``scoring``; a call that raised or was cancelled is a failure, recorded as one."""
    if future.cancelled():
        scoring.outcome = "judge call abandoned: the judge pool was closed"
    elif (exc := future.exception()) is not None:
        scoring.outcome = f"internal error in the score loop: {type(exc).__name__}: {exc}"[:2000]
    return scoring


def _batch_key(tickets: Any) -> str:
    """Names the rows of one write by the records they come from: the same records give the same dedup token."""
    digest = hashlib.sha256()
    for ticket in tickets:
        digest.update(f"{ticket.partition}:{ticket.offset};".encode())
    return "live:" + digest.hexdigest()[:32]
