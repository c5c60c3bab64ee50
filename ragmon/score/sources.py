"""Where the live scorer reads traces from: the Kafka traces topic (a consumer group) or the store (backfills).

``KafkaScoreSource`` reads the traces topic in its own consumer group (``ragmon-score``), so scoring scales out
like ingest: partitions split the load between replicas, and since the sampling decision is a hash of the
query id every replica decides the same for the same query. Each record comes with its partition and offset;
the loop commits explicit offsets, only up to what is stored (``ragmon.score.ledger``), and only for partitions
it still owns; auto-commit is off, and a new group starts at the earliest offset so no trace is skipped.
``pause``/``resume`` stop fetching while the judges are behind. Messages that do not decode are skipped and
counted: dead-lettering them is the ingest role's job. Traces are redacted as ingest redacts them before storage
(``ingest.redact_*``), so a judge never sees what the store would not hold. kafka-python exceptions are translated into
``SourceError`` here.

``StoreScoreSource`` pages through stored traces in [since, until) with keyset pagination on (ts, trace_id), as
``batches`` or as a source of the live loop (``poll``: one page per call, as the records of one partition), so
a backfill runs through the same sliding window as the live loop (``ragmon.score.consume``): the judges keep
working on the next page while a slow call of the last one is still out. Its ``batch_key`` names a write by the
trace ids it holds, so a backfill run again over the same traces deduplicates.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from datetime import datetime
from typing import Any, NamedTuple

from ragmon.contracts.decode import DecodedTrace, decode_trace
from ragmon.errors import RetryableSourceError, SourceError
from ragmon.kafka_options import consumer_options
from ragmon.score import queries
from ragmon.score.queries import ScoreStore
from ragmon.store.trace_rows import row_to_trace
from ragmon.stream.source import close_consumer, consumer_lag

log = logging.getLogger(__name__)


class StoreScoreSource:
    """Stored traces with ``since <= ts < until``, oldest first, in pages of ``page_size``; with ``failed_of`` (a judge
    fingerprint) only those whose scores of that judge are stored as failed. Not thread-safe."""

    #: the one "partition" of the records ``poll`` returns
    PARTITION = ("store", 0)

    def __init__(self, store: ScoreStore, since: datetime, until: datetime, *, page_size: int = 500,
                 failed_of: str | None = None):
        if until <= since:
            raise ValueError(f"--until ({until.isoformat()}) must be after --since ({since.isoformat()})")
        self.store, self.since, self.until, self.page_size = store, since, until, page_size
        self.failed_of = failed_of
        self._after: tuple[datetime, str] = (since, "")
        self._read = 0
        self._paused = False
        #: every trace of the window was handed out by ``poll``
        self.exhausted = False

    def count(self) -> int:
        return queries.count_traces(self.store, self.since, self.until, failed_of=self.failed_of)

    def batches(self) -> Iterator[tuple[list[dict[str, Any]], str]]:
        """(trace documents, batch key) pages; the key names the page so re-running a backfill dedups."""
        last_ts, last_id = self.since, ""
        while True:
            rows = queries.traces_after(self.store, self.since, self.until, (last_ts, last_id), self.page_size,
                                        failed_of=self.failed_of)
            if not rows:
                return
            last_ts, last_id = rows[-1]["ts"], rows[-1]["trace_id"]
            key = "store:" + hashlib.sha256("|".join(r["trace_id"] for r in rows).encode()).hexdigest()[:32]
            yield [row_to_trace(r) for r in rows], key


    # -- as a source of the live loop (``ragmon.score.consume``) ------------------------------------------------

    def poll(self, timeout_seconds: float | None = None) -> list[Polled]:
        """The next page as records (none while paused or once the window is read: then it waits up to
        ``timeout_seconds``, as a broker poll would, so the loop does not spin)."""
        if self._paused or self.exhausted:
            time.sleep(min(timeout_seconds if timeout_seconds is not None else 0.05, 0.05))
            return []
        rows = queries.traces_after(self.store, self.since, self.until, self._after, self.page_size,
                                    failed_of=self.failed_of)
        if not rows:
            self.exhausted = True
            return []
        self._after = (rows[-1]["ts"], rows[-1]["trace_id"])
        first, self._read = self._read, self._read + len(rows)
        return [Polled(self.PARTITION, first + i, row_to_trace(r)) for i, r in enumerate(rows)]

    def commit(self, offsets: Mapping[tuple[str, int], int]) -> None:
        """Nothing to commit: a backfill is over when it returns (run it again to redo it)."""

    def pause(self) -> None:
        self._paused = True

    def resume(self) -> None:
        self._paused = False

    @staticmethod
    def batch_key(trace_ids: Iterable[str]) -> str:
        """The key of one write, from the trace ids it holds: the same traces, the same deduplication token."""
        return "store:" + hashlib.sha256("|".join(trace_ids).encode()).hexdigest()[:32]


class Polled(NamedTuple):
    """One record read from the traces topic: where it was, and the trace (None: not a valid trace)."""

    partition: tuple[str, int]
    offset: int
    trace: Any


class KafkaScoreSource:
    """The traces topic, read by the score role's consumer group. Not thread-safe."""

    def __init__(self, settings: Any, *, topic: str, group_id: str, max_records: int, poll_timeout_seconds: float,
                 redact: Callable[[Any], Any] | None = None):
        from kafka import KafkaConsumer
        from kafka.errors import KafkaError

        self.topic = topic
        self.max_records = max_records
        self.poll_timeout_ms = int(poll_timeout_seconds * 1000)
        self.skipped = 0
        #: the ingest redaction, applied before the judge sees a trace (the topic holds what the app sent)
        self._redact = redact or (lambda trace: trace)
        k = settings
        # the same client options as the ingest consumer (security, SASL, fetch sizes, reconnect backoff)
        options = consumer_options(k, group_id=group_id, client_id="ragmon-score")
        try:
            self._consumer = KafkaConsumer(topic, **options)
        except KafkaError as exc:
            raise RetryableSourceError(f"cannot reach Kafka at {k.bootstrap_servers}: {exc}") from None
        from ragmon.stream.source import warn_if_topic_missing

        warn_if_topic_missing(self._consumer, topic, k.bootstrap_servers)

    def poll(self, timeout_seconds: float | None = None) -> list[Polled]:
        """The records of one poll, each with its partition and offset (``trace`` None: not a valid trace)."""
        from kafka.errors import KafkaError

        timeout_ms = self.poll_timeout_ms if timeout_seconds is None else int(timeout_seconds * 1000)
        try:
            polled = self._consumer.poll(timeout_ms=timeout_ms, max_records=self.max_records)
        except KafkaError as exc:
            raise RetryableSourceError(f"Kafka poll failed: {exc}") from None
        out: list[Polled] = []
        for tp, records in sorted(polled.items(), key=lambda kv: kv[0].partition):
            for record in records:
                decoded = decode_trace(record.value or b"")
                if not isinstance(decoded, DecodedTrace):
                    self.skipped += 1
                out.append(Polled((tp.topic, tp.partition), record.offset,
                                  self._redact(decoded.trace) if isinstance(decoded, DecodedTrace) else None))
        return out

    def commit(self, offsets: Mapping[tuple[str, int], int]) -> None:
        """Commit ``{(topic, partition): next offset}`` for the partitions this consumer still owns (call only
        once everything before those offsets is stored)."""
        from kafka import OffsetAndMetadata, TopicPartition
        from kafka.errors import KafkaError

        owned = {(tp.topic, tp.partition) for tp in self._consumer.assignment()}
        mine = {TopicPartition(t, p): OffsetAndMetadata(o, "", -1) for (t, p), o in offsets.items() if (t, p) in owned}
        if not mine:
            return
        try:
            self._consumer.commit(mine)
        except KafkaError as exc:  # a rebalance took the partitions: the next owner re-scores (rows dedup)
            raise SourceError(f"offset commit failed: {exc}") from None

    def assignment(self) -> set[tuple[str, int]]:
        return {(tp.topic, tp.partition) for tp in self._consumer.assignment()}

    def pause(self) -> None:
        """Stop fetching (backpressure: the judges are behind); polling keeps the group membership alive."""
        parts = self._consumer.assignment()
        if parts:
            self._consumer.pause(*parts)

    def resume(self) -> None:
        parts = self._consumer.paused()
        if parts:
            self._consumer.resume(*parts)

    def lag(self) -> dict[tuple[str, int], int]:
        return consumer_lag(self._consumer)

    def close(self) -> None:
        close_consumer(self._consumer)
