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

``StoreScoreSource`` pages through stored traces in [since, until) with keyset pagination on (ts, trace_id).
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Iterator, Mapping
from datetime import datetime
from typing import Any, NamedTuple

from ragmon.contracts.decode import DecodedTrace, decode_trace
from ragmon.errors import RetryableSourceError, SourceError
from ragmon.kafka_options import CONSUMER_CLOSE_TIMEOUT_MS, consumer_options
from ragmon.score import queries
from ragmon.score.queries import ScoreStore
from ragmon.store.trace_rows import row_to_trace

log = logging.getLogger(__name__)


class StoreScoreSource:
    """Stored traces with ``since <= ts < until``, oldest first, in pages of ``page_size``."""

    def __init__(self, store: ScoreStore, since: datetime, until: datetime, *, page_size: int = 500):
        if until <= since:
            raise ValueError(f"--until ({until.isoformat()}) must be after --since ({since.isoformat()})")
        self.store, self.since, self.until, self.page_size = store, since, until, page_size

    def count(self) -> int:
        return queries.count_traces(self.store, self.since, self.until)

    def batches(self) -> Iterator[tuple[list[dict[str, Any]], str]]:
        """(trace documents, batch key) pages; the key names the page so re-running a backfill dedups."""
        last_ts, last_id = self.since, ""
        while True:
            rows = queries.traces_after(self.store, self.since, self.until, (last_ts, last_id), self.page_size)
            if not rows:
                return
            last_ts, last_id = rows[-1]["ts"], rows[-1]["trace_id"]
            key = "store:" + hashlib.sha256("|".join(r["trace_id"] for r in rows).encode()).hexdigest()[:32]
            yield [row_to_trace(r) for r in rows], key


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
        from ragmon.ingest.source import warn_if_topic_missing

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
        """Messages behind the end of each assigned partition, from the last fetch (no extra request); a partition
        not fetched yet has no reading."""
        lags: dict[tuple[str, int], int] = {}
        for tp in self._consumer.assignment():
            high = self._consumer.highwater(tp)
            if high is None:
                continue
            try:
                position = self._consumer.position(tp, timeout_ms=100)
            except Exception:  # noqa: BLE001 - lag is best effort
                continue
            if position is not None:
                lags[(tp.topic, tp.partition)] = max(0, high - position)
        return lags

    def close(self) -> None:
        try:
            self._consumer.close(autocommit=False, timeout_ms=CONSUMER_CLOSE_TIMEOUT_MS)
        except Exception:  # noqa: BLE001,S110 - closing is best effort
            pass
