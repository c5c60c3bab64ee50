"""Outcome events (schemas/outcome.v1) from their own topic or a file into ``outcomes``, with the trace guarantees.

Owns the outcome loop: poll → decode (``decode_outcome``) → batch → insert with a deduplication token derived
from the batch's source positions → dead letters acknowledged → commit the batch's offsets. Before a batch's
first write it asks the store which of its events are already there (by ``event_id``, the table's deduplication
key), so ``stored`` counts events new to the store and ``already_stored`` the re-deliveries (a replay, a file
loaded again), as FINAL reads them: a second load of the same file stores nothing and says so. Offsets are
committed only after both the insert and the dead letters were acknowledged, so a crash replays at most the
uncommitted tail, which collapses under FINAL (one row per ``event_id``). While the store or the dead-letter sink
fails, the source is paused and the same batch is retried on the ``Backoff`` schedule; memory stays bounded by
one batch. Partitions revoked in a rebalance are flushed first. After each poll it publishes its
``ConsumerState`` (lag read by ``ragmon.stream.lag``) for ``--exit-when-idle``. It reuses the trace sources and sinks
(``TraceSource``, ``DeadLetterSink``), stores through ``queries`` (``OutcomeStore``), and must not talk to Kafka or
ClickHouse directly.
"""

from __future__ import annotations

import hashlib
import logging
import random
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from ragmon.config import AbSettings
from ragmon.contracts.decode import Rejection
from ragmon.contracts.outcome import Outcome, decode_outcome, looks_like_a_trace
from ragmon.daemon import ConsumerState
from ragmon.errors import RetryableSourceError, RetryableStoreError, SourceError, StoreError
from ragmon.outcomes.metrics import OutcomesMetrics
from ragmon.outcomes.queries import COLUMNS, OutcomeStore, stored_event_ids, write_outcomes
from ragmon.stream.backoff import Backoff
from ragmon.stream.dead_letter import DeadLetter, DeadLetterSink
from ragmon.stream.lag import LagReporter
from ragmon.stream.source import Partition, RawMessage, TraceSource
from ragmon.telemetry import Telemetry

log = logging.getLogger(__name__)


@dataclass
class OutcomeStats:
    consumed: int = 0
    #: events new to the store (a re-delivered event is not counted again: ``already_stored``)
    stored: int = 0
    #: valid events that were in the store already, or twice in what was read (re-deliveries)
    already_stored: int = 0
    #: dead-lettered messages that are trace documents (trace.v1), not outcome events: the wrong input
    traces: int = 0
    batches: int = 0
    retries: int = 0
    dead_letters: Counter = field(default_factory=Counter)
    last_error: str | None = None


@dataclass
class _Batch:
    outcomes: list[tuple[Outcome, str]] = field(default_factory=list)
    letters: list[DeadLetter] = field(default_factory=list)
    #: partition → (first offset, next offset to commit)
    ranges: dict[Partition, tuple[int, int]] = field(default_factory=dict)
    started: float = 0.0
    #: how many of ``outcomes`` were stored before this batch, asked once before its first write (a retry after
    #: a lost acknowledgement must not find its own rows and call them old)
    known: int | None = None
    traces: int = 0

    def __len__(self) -> int:
        return len(self.outcomes) + len(self.letters)

    def token(self) -> str:
        spans = sorted(f"{t}/{p}/{a}-{b}" for (t, p), (a, b) in self.ranges.items())
        return hashlib.sha256(("outcomes|" + "|".join(spans)).encode()).hexdigest()


class OutcomeLoop:
    """One consumer of outcome events. Not thread-safe: ``run`` owns it. Exports its counts (``OutcomesMetrics``)
    through ``telemetry`` when given (the ``outcomes`` role of ``ragmon run``: ``outcomes_role``)."""

    def __init__(self, source: TraceSource, store: OutcomeStore, dead_letters: DeadLetterSink, settings: AbSettings, *,
                 clock: Callable[[], float] = time.monotonic, poll_timeout_seconds: float = 0.5,
                 max_backoff_seconds: float = 30.0, telemetry: Telemetry | None = None):
        self.source, self.store, self.sink, self.settings = source, store, dead_letters, settings
        self.stats = OutcomeStats()
        #: the loop's metrics, registered on ``telemetry`` when given
        self.metrics = telemetry.use(OutcomesMetrics) if telemetry is not None else None
        #: monotonic time of the last poll (the role's liveness)
        self.last_poll = time.monotonic()
        self._clock = clock
        self._poll_timeout = poll_timeout_seconds
        self._batch = _Batch()
        self._backoff = Backoff(max_backoff_seconds, clock=clock, rng=random.Random())
        self._failing = False
        self.lag = LagReporter(source)
        #: this loop's progress after its last poll, for ``--exit-when-idle`` (read from another thread)
        self.consumer_state = ConsumerState()
        source.set_revoke_handler(self._on_revoke)

    @property
    def paused(self) -> bool:
        """Writes are failing: the source is paused and the batch waits for its retry."""
        return self._failing

    def idle(self) -> bool:
        """Nothing read is waiting to be stored or committed."""
        return not len(self._batch) and not self._failing

    def run(self, stop: threading.Event, until: Callable[[], bool] | None = None) -> OutcomeStats:
        """Consume until ``stop`` is set (or ``until()`` is true), then flush what is buffered."""
        try:
            while not stop.is_set():
                if self._failing:
                    self.consumer_state = ConsumerState(self.stats.consumed, False, self.lag.assigned(), False)
                    if stop.wait(self._backoff.remaining()):
                        break
                    self._flush()
                    continue
                room = self.settings.max_batch_events - len(self._batch)
                for msg in self.source.poll(self._poll_timeout, max(1, room)):
                    self._add(msg)
                self.last_poll = time.monotonic()
                self.lag.maybe_update(self._clock())
                due = len(self._batch) and (
                    len(self._batch) >= self.settings.max_batch_events
                    or self._clock() - self._batch.started >= self.settings.flush_interval_seconds
                    or (until is not None and until()))
                if due:
                    self._flush()
                self.consumer_state = ConsumerState(self.stats.consumed, self.idle(), self.lag.assigned(),
                                                    self.lag.caught_up())
                if not due and until is not None and until() and self.idle():
                    break
        finally:
            if len(self._batch) and not self._failing:
                self._flush()
        return self.stats

    def _add(self, msg: RawMessage) -> None:
        batch = self._batch
        if not len(batch):
            batch.started = self._clock()
        self.stats.consumed += 1
        key = (msg.topic, msg.partition)
        first = batch.ranges.get(key, (msg.offset, msg.offset))[0]
        batch.ranges[key] = (first, msg.offset + 1)
        if msg.unreadable:
            result: Outcome | Rejection = Rejection(msg.reason, msg.unreadable)
        else:
            result = decode_outcome(msg.value)
        if isinstance(result, Rejection):
            batch.letters.append(DeadLetter(msg.topic, msg.partition, msg.offset, msg.value, result.reason,
                                            result.detail, msg.headers))
            if result.reason == "schema" and looks_like_a_trace(msg.value):
                batch.traces += 1
        else:
            batch.outcomes.append((result, f"{msg.topic}/{msg.partition}/{msg.offset}"))

    def _flush(self) -> dict[Partition, int]:
        """Store, dead-letter, then commit the batch; on failure pause and keep it for a retry."""
        batch = self._batch
        try:
            if batch.outcomes:
                if batch.known is None:
                    batch.known = _already_stored(self.store, [o for o, _ in batch.outcomes])
                write_outcomes(self.store, _columns(batch.outcomes), batch.token())
            sent = self.sink.send(batch.letters)
            offsets = {p: end for p, (_, end) in batch.ranges.items()}
            self.source.commit(offsets)
        except (StoreError, SourceError) as exc:
            retryable = isinstance(exc, RetryableStoreError | RetryableSourceError)
            self.stats.retries += 1
            self.stats.last_error = str(exc)
            if self.metrics is not None:
                self.metrics.outcomes_store_retries.inc()
            delay = self._backoff.failed(retryable)
            log.warning("outcome batch not stored (%s); pausing the source, retry in %.1fs", exc, delay)
            if not self._failing:
                self.source.pause()
            self._failing = True
            return {}
        old = batch.known or 0
        self.stats.stored += len(batch.outcomes) - old
        self.stats.already_stored += old
        self.stats.traces += batch.traces
        self.stats.batches += 1
        self.stats.dead_letters.update(d.reason for d in sent)
        if self.metrics is not None:
            self.metrics.outcomes_consumed.inc(len(batch))
            self.metrics.outcomes_stored.inc(len(batch.outcomes) - old)
            self.metrics.outcomes_already_stored.inc(old)
            for d in sent:
                self.metrics.outcomes_dead_letters.labels(d.reason).inc()
        self._batch = _Batch()
        self._backoff.reset()
        if self._failing:
            self._failing = False
            self.source.resume()
        return offsets

    def _on_revoke(self, partitions: set[Partition]) -> Mapping[Partition, int]:
        if not len(self._batch):
            return {}
        offsets = self._flush()
        return {p: o for p, o in offsets.items() if p in partitions}


def _already_stored(store: OutcomeStore, outcomes: list[Outcome]) -> int:
    """How many of ``outcomes`` the store holds already, or repeat an earlier one of the list (by ``event_id``,
    looked up through the table's key: query id, kind, event id)."""
    found = stored_event_ids(store, {(o.query_id, o.kind.value, o.identity) for o in outcomes})
    new = {o.identity for o in outcomes} - found
    return len(outcomes) - len(new)


def _columns(outcomes: list[tuple[Outcome, str]]) -> dict[str, list[Any]]:
    now = datetime.now(UTC)
    cols: dict[str, list[Any]] = {c: [] for c in COLUMNS}
    for o, where in outcomes:
        for c, v in zip(COLUMNS, (o.identity, o.query_id, o.kind.value, o.time.astimezone(UTC), o.value, now, where),
                        strict=True):
            cols[c].append(v)
    return cols


def open_outcome_loop(settings: Any, store: Any, *, file: str | None = None, dead_letter_file: str = "-",
                      telemetry: Telemetry | None = None,
                      ) -> tuple[OutcomeLoop, Callable[[], bool] | None, Callable[[], None]]:
    """(loop, the "input done" test for a file or None for Kafka, close) for ``ragmon ingest --outcomes``.

    Kafka: ``ab.outcomes_topic`` in group ``ab.outcomes_group_id``, dead letters to ``ab.outcomes_dead_letter_topic``
    (the other kafka.* settings apply). File: JSON Lines (``-``: standard input), dead letters appended to
    ``dead_letter_file``. Fails fast when the broker or a file cannot be opened."""
    if file is not None:
        from ragmon.stream.dead_letter_file import FileDeadLetterSink
        from ragmon.stream.file_source import FileTraceSource, topic_of

        sink: Any = FileDeadLetterSink(dead_letter_file)
        try:
            source: Any = FileTraceSource([file], topic=topic_of(file),
                                          max_line_bytes=settings.ingest.max_message_bytes)
        except Exception:
            sink.close()
            raise
        loop = OutcomeLoop(source, store, sink, settings.ab, telemetry=telemetry)
        done: Callable[[], bool] | None = lambda: source.exhausted and loop.idle()  # noqa: E731
    else:
        from ragmon.stream.dead_letter import KafkaDeadLetterSink
        from ragmon.stream.source import KafkaTraceSource

        kafka = settings.kafka.model_copy(update={"topic": settings.ab.outcomes_topic,
                                                  "group_id": settings.ab.outcomes_group_id,
                                                  "dead_letter_topic": settings.ab.outcomes_dead_letter_topic})
        source = KafkaTraceSource(kafka, client_id="ragmon-outcomes", topic_setting="ab.outcomes_topic "
                                  "(RAGMON_AB__OUTCOMES_TOPIC, --topic with --outcomes)")
        try:
            sink = KafkaDeadLetterSink(kafka)
        except Exception:
            source.close()
            raise
        loop, done = OutcomeLoop(source, store, sink, settings.ab, telemetry=telemetry), None

    def close() -> None:
        source.close()
        sink.close()

    return loop, done, close
