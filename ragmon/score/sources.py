"""Where the live scorer reads traces from: the Kafka traces topic (a consumer group) or the store (backfills).

``KafkaScoreSource`` reads the traces topic in its own consumer group (``ragmon-score``), so scoring scales out
like ingest: partitions split the load between replicas, and since the sampling decision is a hash of the
query id every replica decides the same for the same query. Offsets are committed only after the batch's rows
are stored (``commit`` is called by the loop), auto-commit is off, and a new group starts at the earliest
offset so no trace is skipped. Messages that do not decode are skipped and counted: dead-lettering them is
the ingest role's job. kafka-python exceptions are translated into ``SourceError`` here.

``StoreScoreSource`` pages through stored traces in [since, until) with keyset pagination on (ts, trace_id).
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterator
from datetime import datetime
from typing import Any

from ragmon.contracts.decode import DecodedTrace, decode_trace
from ragmon.errors import RetryableSourceError, SourceError
from ragmon.kafka_options import consumer_options
from ragmon.store import SELECT_TRACE_COLUMNS, row_to_trace

log = logging.getLogger(__name__)


class StoreScoreSource:
    """Stored traces with ``since <= ts < until``, oldest first, in pages of ``page_size``."""

    def __init__(self, store: Any, since: datetime, until: datetime, *, page_size: int = 500):
        if until <= since:
            raise ValueError(f"--until ({until.isoformat()}) must be after --since ({since.isoformat()})")
        self.store, self.since, self.until, self.page_size = store, since, until, page_size

    def count(self) -> int:
        return int(self.store.command(
            f"SELECT count() FROM {self.store.table('traces')} FINAL WHERE ts >= {{since:DateTime64(3, 'UTC')}} "
            "AND ts < {until:DateTime64(3, 'UTC')}", {"since": self.since, "until": self.until}))

    def batches(self) -> Iterator[tuple[list[dict[str, Any]], str]]:
        """(trace documents, batch key) pages; the key names the page so re-running a backfill dedups."""
        last_ts, last_id = self.since, ""
        while True:
            rows = self.store.query_rows(
                f"SELECT {SELECT_TRACE_COLUMNS} FROM {self.store.table('traces')} FINAL "
                "WHERE ts >= {since:DateTime64(3, 'UTC')} AND ts < {until:DateTime64(3, 'UTC')} "
                "AND (ts, trace_id) > ({last_ts:DateTime64(3, 'UTC')}, {last_id:String}) "
                "ORDER BY ts, trace_id LIMIT {limit:UInt32}",
                {"since": self.since, "until": self.until, "last_ts": last_ts, "last_id": last_id,
                 "limit": self.page_size},
            )
            if not rows:
                return
            last_ts, last_id = rows[-1]["ts"], rows[-1]["trace_id"]
            key = "store:" + hashlib.sha256("|".join(r["trace_id"] for r in rows).encode()).hexdigest()[:32]
            yield [row_to_trace(r) for r in rows], key


class KafkaScoreSource:
    """The traces topic, read by the score role's consumer group. Not thread-safe."""

    def __init__(self, settings: Any, *, topic: str, group_id: str, max_records: int, poll_timeout_seconds: float):
        from kafka import KafkaConsumer
        from kafka.errors import KafkaError

        self.topic = topic
        self.max_records = max_records
        self.poll_timeout_ms = int(poll_timeout_seconds * 1000)
        self.skipped = 0
        k = settings
        # the same client options as the ingest consumer (security, SASL, fetch sizes, reconnect backoff)
        options = consumer_options(k, group_id=group_id, client_id="ragmon-score")
        try:
            self._consumer = KafkaConsumer(topic, **options)
        except KafkaError as exc:
            raise RetryableSourceError(f"cannot reach Kafka at {k.bootstrap_servers}: {exc}") from None
        from ragmon.ingest.source import warn_if_topic_missing

        warn_if_topic_missing(self._consumer, topic, k.bootstrap_servers)
        self._pending: dict[Any, int] = {}

    def poll(self) -> tuple[list[Any], str | None]:
        """Decoded traces of one poll and a batch key naming their offsets (None when nothing came)."""
        from kafka.errors import KafkaError

        try:
            polled = self._consumer.poll(timeout_ms=self.poll_timeout_ms, max_records=self.max_records)
        except KafkaError as exc:
            raise RetryableSourceError(f"Kafka poll failed: {exc}") from None
        traces: list[Any] = []
        spans = []
        for tp, records in sorted(polled.items(), key=lambda kv: kv[0].partition):
            if not records:
                continue
            for record in records:
                decoded = decode_trace(record.value or b"")
                if isinstance(decoded, DecodedTrace):
                    traces.append(decoded.trace)
                else:
                    self.skipped += 1
            self._pending[tp] = records[-1].offset + 1
            spans.append(f"{tp.topic}/{tp.partition}/{records[0].offset}-{records[-1].offset}")
        return traces, (";".join(spans) if spans else None)

    def commit(self) -> None:
        """Commit the offsets of everything polled so far (call after the batch is stored)."""
        from kafka import OffsetAndMetadata
        from kafka.errors import KafkaError

        if not self._pending:
            return
        offsets = {tp: OffsetAndMetadata(offset, "", -1) for tp, offset in self._pending.items()}
        try:
            self._consumer.commit(offsets)
        except KafkaError as exc:  # a rebalance took the partitions: the next owner re-scores (rows dedup)
            raise SourceError(f"offset commit failed: {exc}") from None
        self._pending.clear()

    def close(self) -> None:
        try:
            self._consumer.close(autocommit=False)
        except Exception:  # noqa: BLE001,S110 - closing is best effort
            pass
