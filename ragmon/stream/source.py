"""Where raw trace messages come from: the ``TraceSource`` contract, Kafka, and an in-memory double.

Owns: polling batches of raw messages, pausing/resuming consumption (backpressure), committing offsets the
pipeline says are safe, consumer lag, and telling the pipeline about partition revocation. It must not decode,
store or decide what is committable: that is the pipeline's job. kafka-python exceptions are translated here
into ``SourceError`` / ``RetryableSourceError``; nothing above this module sees a kafka exception.

Rebalance (kafka-python 3): the listener runs on the client's IO thread while the pipeline thread is blocked
inside ``poll()`` (or ``close()``). ``on_revoke`` is therefore called synchronously from within ``poll``; it
may flush the pipeline's batch (blocking the IO loop for the insert, well inside the session timeout) and
returns the offsets to commit for the revoked partitions, which the listener commits before giving them up.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol

from ragmon.config import KafkaSettings
from ragmon.errors import ConfigError, FatalSourceError, RetryableSourceError, SourceError
from ragmon.kafka_options import CONSUMER_CLOSE_TIMEOUT_MS, consumer_options

log = logging.getLogger(__name__)

#: a partition: (topic, partition number)
Partition = tuple[str, int]

#: how long one offset commit may block the consume loop
COMMIT_TIMEOUT_MS = 5_000


#: where a consumer's topic is set, for the missing-topic warning
TOPIC_SETTING = "kafka.topic (RAGMON_KAFKA__TOPIC, --topic)"


def warn_if_topic_missing(consumer: object, topic: str, bootstrap: str, setting: str = TOPIC_SETTING) -> None:
    """Log a warning when ``topic`` does not exist on the cluster: the consumer would wait for it silently (a typo
    in kafka.topic looks like an idle topic). Never raises."""
    try:
        exists = bool(consumer.partitions_for_topic(topic))  # type: ignore[attr-defined]
    except Exception:  # noqa: BLE001 - a best-effort early warning
        return
    if not exists:
        log.warning("topic %r does not exist on %s (yet): waiting for it to be created; check %s if it should "
                    "exist", topic, bootstrap, setting)


class RawMessage(NamedTuple):
    """One message as read from the source: bytes plus where it came from (immutable; a named tuple because
    one is built per consumed message, ~4× cheaper than a frozen dataclass)."""

    topic: str
    partition: int
    offset: int
    value: bytes
    headers: tuple[tuple[str, bytes], ...] = ()
    timestamp_ms: int = -1
    #: why this record cannot be decoded as a message ('' normally): the client could not read it (``value`` is
    #: then empty when its bytes never reached ragmon), or an input file's line is too long
    unreadable: str = ""
    #: the dead-letter reason when ``unreadable`` is set
    reason: str = "unreadable_record"
    #: OTLP spans already parsed from ``value`` by the source (the OTLP/HTTP receiver parses a request to answer
    #: it); None: the intake parses ``value``
    spans: list[Any] | None = None


#: called with the revoked partitions; returns {partition: next offset to commit} for those it flushed
RevokeHandler = Callable[[set[Partition]], Mapping[Partition, int]]


class TraceSource(Protocol):
    """A partitioned log of trace messages read by one member of a consumer group.

    Not thread-safe: one pipeline thread calls every method. ``poll`` blocks up to ``timeout_seconds`` and may
    call ``on_revoke`` (set with ``set_revoke_handler``) from inside itself during a rebalance. Messages of one
    partition are returned in offset order. ``commit`` is synchronous and raises ``SourceError`` when the commit
    did not happen (a later commit of higher offsets supersedes it). Nothing here is committed automatically.
    """

    def set_revoke_handler(self, handler: RevokeHandler) -> None: ...

    def poll(self, timeout_seconds: float, max_records: int) -> list[RawMessage]: ...

    def commit(self, offsets: Mapping[Partition, int]) -> None: ...

    def pause(self) -> None: ...

    def resume(self) -> None: ...

    def assignment(self) -> set[Partition]: ...

    def lag(self) -> dict[Partition, int]: ...

    def close(self) -> None: ...


class LocalPosition:
    """What an in-process source (a file, the OTLP/HTTP port) keeps in place of a consumer group: how far the loop
    got per partition (stored or dead-lettered; never moves back), and whether it asked to stop fetching. The
    source sets ``committed`` and ``_paused`` in its constructor."""

    committed: dict[Partition, int]
    _paused: bool

    def commit(self, offsets: Mapping[Partition, int]) -> None:
        for part, offset in offsets.items():
            self.committed[part] = max(offset, self.committed.get(part, 0))

    def pause(self) -> None:
        self._paused = True

    def resume(self) -> None:
        self._paused = False


class KafkaTraceSource:
    """A kafka-python consumer-group member: manual commits, earliest reset, pause/resume, revoke hook."""

    def __init__(self, settings: KafkaSettings, *, client_id: str = "ragmon-ingest",
                 topic_setting: str = TOPIC_SETTING):
        from kafka import AsyncConsumerRebalanceListener, KafkaConsumer
        from kafka.errors import KafkaError

        from ragmon.stream import kafka_records  # imports kafka-python, as this class does: only when used

        kafka_records.install()  # a non-UTF-8 header key must not cost the rest of its record batch
        missing = kafka_records.missing_codecs()
        if missing:
            log.warning("kafka-python cannot decompress %s here: a topic compressed so stops ingest; install "
                        "the missing package(s) (ragmon declares them all)", ", ".join(missing))
        self._settings = settings
        self._handler: RevokeHandler | None = None
        self._paused = False
        source = self

        class _Listener(AsyncConsumerRebalanceListener):
            async def on_partitions_revoked(self, revoked):  # type: ignore[override]
                await source._on_revoked(revoked)

            async def on_partitions_assigned(self, assigned):  # type: ignore[override]
                source._on_assigned(assigned)

            async def on_partitions_lost(self, lost):  # type: ignore[override]
                # evicted: a commit would be rejected; the handler discards state and nothing is committed
                if source._handler is not None:
                    source._handler({(tp.topic, tp.partition) for tp in lost})

        try:
            self._consumer = KafkaConsumer(**consumer_options(settings, group_id=settings.group_id,
                                                              client_id=client_id))
            self._consumer.subscribe([settings.topic], listener=_Listener())
            warn_if_topic_missing(self._consumer, settings.topic, settings.bootstrap_servers, topic_setting)
        except KafkaError as exc:
            raise SourceError(
                f"cannot connect to Kafka at {settings.bootstrap_servers} ({type(exc).__name__}: {exc}); check "
                "kafka.bootstrap_servers (RAGMON_KAFKA__BOOTSTRAP_SERVERS) and that the broker is up"
            ) from None
        except (ValueError, TypeError, AssertionError) as exc:
            raise ConfigError([f"kafka: {exc}"]) from None
        self._kafka_error = KafkaError

    # -- the listener ---------------------------------------------------------------------------------------

    async def _on_revoked(self, revoked: Iterable) -> None:
        parts = {(tp.topic, tp.partition) for tp in revoked}
        if not parts or self._handler is None:
            return
        offsets = self._handler(parts)
        if offsets:
            from kafka import OffsetAndMetadata, TopicPartition

            future = self._consumer.commit_async(
                {TopicPartition(t, p): OffsetAndMetadata(o, "", -1) for (t, p), o in offsets.items()}
            )
            try:
                await future
                log.info("committed %s before giving up revoked partitions", dict(offsets))
            except Exception as exc:  # noqa: BLE001 - left uncommitted: the next owner re-reads (never lost)
                log.warning("commit on revoke failed (%s); the next owner re-reads those messages", exc)

    def _on_assigned(self, assigned: Iterable) -> None:
        log.info("assigned %s", sorted((tp.topic, tp.partition) for tp in assigned))
        if self._paused and assigned:
            self._consumer.pause(*assigned)  # backpressure survives a rebalance

    # -- TraceSource ----------------------------------------------------------------------------------------

    def set_revoke_handler(self, handler: RevokeHandler) -> None:
        self._handler = handler

    def poll(self, timeout_seconds: float, max_records: int) -> list[RawMessage]:
        from kafka.errors import CorruptRecordError, UnsupportedCodecError

        from ragmon.stream import kafka_records

        try:
            batches = self._consumer.poll(timeout_ms=int(timeout_seconds * 1000), max_records=max_records)
        except CorruptRecordError as exc:
            return self._skip_unreadable(exc)
        except UnsupportedCodecError as exc:
            # kafka-python would loop inside every later poll on the batch it could not decompress (a core at
            # 100 %, the GIL held): no retry can read it, so say what to install and stop
            raise FatalSourceError(
                f"cannot read {self._settings.topic}: {exc}; install the codec's package ("
                f"{', '.join(f'{c}: {p}' for c, p in kafka_records.CODEC_PACKAGES.items())}; all are ragmon "
                "dependencies) and start ingest again: nothing after the last commit was lost") from None
        except self._kafka_error as exc:
            raise RetryableSourceError(f"Kafka poll failed: {type(exc).__name__}: {exc}") from None
        out: list[RawMessage] = []
        for tp, records in batches.items():
            topic, part = tp.topic, tp.partition
            for r in records:
                value = r.value if r.value is not None else b""
                if not r.headers:  # most messages have none
                    out.append(RawMessage(topic, part, r.offset, value, (), r.timestamp))
                    continue
                bad = kafka_records.unreadable_headers(r.headers)
                headers = tuple((k, v or b"") for k, v in r.headers)
                if not bad:
                    out.append(RawMessage(topic, part, r.offset, value, headers, r.timestamp))
                    continue
                log.warning("record %s/%d@%d has header keys that are not UTF-8 (%s); dead-lettering it and going on",
                            topic, part, r.offset, ", ".join(bad))
                out.append(RawMessage(
                    topic, part, r.offset, value, headers, r.timestamp,
                    f"header key(s) {', '.join(bad)} are not UTF-8 (Kafka header keys are UTF-8 "
                    "strings); the value and headers are kept, those keys with \\x escapes"))
        return out

    def _skip_unreadable(self, exc: Exception) -> list[RawMessage]:
        """A record kafka-python cannot parse (e.g. a record batch failing its checksum; a non-UTF-8 header key
        is read, see ``kafka_records.py``) stops its partition: the client raises at it, and after that its fetcher
        returns nothing more for the partition (kafka-python 3.0 loops on the exhausted record iterator). Step
        over that record and hand it on as unreadable, so it is dead-lettered and its offset committed like any
        rejected message.

        Which partition failed is not in the exception: it is the fetcher's current partition, read from
        kafka-python's internals (``_fetcher._next_partition_records``). If that is ever missing, the error is
        a retryable poll failure, as before."""
        part = getattr(getattr(self._consumer, "_fetcher", None), "_next_partition_records", None)
        tp = getattr(part, "topic_partition", None)
        if tp is None or tp not in self._consumer.assignment():
            raise RetryableSourceError(f"Kafka poll failed: {type(exc).__name__}: {exc}")
        offset = self._consumer.position(tp)
        # seeking past it also makes the fetcher drop the stuck records (their offset no longer matches)
        self._consumer.seek(tp, offset + 1)
        log.warning("record %s/%d@%d cannot be read by the Kafka client (%s); dead-lettering it and going on",
                    tp.topic, tp.partition, offset, exc)
        return [RawMessage(tp.topic, tp.partition, offset, b"", (), -1,
                           f"the Kafka client cannot read this record: {exc}"[:500])]

    def commit(self, offsets: Mapping[Partition, int]) -> None:
        if not offsets:
            return
        from kafka import OffsetAndMetadata, TopicPartition

        try:
            # bounded: an unbounded commit blocks the loop (and SIGTERM) while the broker is away; a timed-out
            # commit is retried later, and the offsets stay uncommitted until it succeeds
            self._consumer.commit({TopicPartition(t, p): OffsetAndMetadata(o, "", -1) for (t, p), o in offsets.items()},
                                  timeout_ms=COMMIT_TIMEOUT_MS)
        except self._kafka_error as exc:
            raise RetryableSourceError(f"offset commit failed: {type(exc).__name__}: {exc}") from None

    def pause(self) -> None:
        self._paused = True
        parts = self._consumer.assignment()
        if parts:
            self._consumer.pause(*parts)

    def resume(self) -> None:
        self._paused = False
        parts = self._consumer.paused()
        if parts:
            self._consumer.resume(*parts)

    def assignment(self) -> set[Partition]:
        return {(tp.topic, tp.partition) for tp in self._consumer.assignment()}

    def lag(self) -> dict[Partition, int]:
        return consumer_lag(self._consumer)

    def close(self) -> None:
        close_consumer(self._consumer)


def consumer_lag(consumer: Any) -> dict[Partition, int]:
    """Messages behind the end of each partition a kafka-python ``consumer`` is assigned, from the last fetch's high
    watermark (no extra request); a partition not fetched yet, or whose position cannot be read, has no reading. The
    trace, outcome and score consumers all read their lag so."""
    lags: dict[Partition, int] = {}
    for tp in consumer.assignment():
        high = consumer.highwater(tp)
        if high is None:
            continue
        try:
            pos = consumer.position(tp, timeout_ms=100)
        except Exception:  # noqa: BLE001 - lag is best effort
            continue
        if pos is not None:
            lags[(tp.topic, tp.partition)] = max(0, high - pos)
    return lags


def close_consumer(consumer: Any) -> None:
    """Leave the group without committing (what is committed was stored); a failure is logged, never raised."""
    try:
        consumer.close(autocommit=False, timeout_ms=CONSUMER_CLOSE_TIMEOUT_MS)
    except Exception as exc:  # noqa: BLE001 - closing is best effort
        log.warning("closing the Kafka consumer failed: %s", exc)


@dataclass
class InMemoryTraceSource:
    """A test double: partitions held in memory, a committed offset per partition, pause/resume, revokes.

    ``crash()`` forgets uncommitted progress (the next poll re-reads from the committed offsets), as a
    ``kill -9`` and restart would. ``revoke(parts)`` runs the revoke handler like a rebalance and commits what
    it returns. Thread-safe for producers appending while the pipeline polls.
    """

    partitions: dict[Partition, list[bytes]] = field(default_factory=dict)
    committed: dict[Partition, int] = field(default_factory=dict)
    position: dict[Partition, int] = field(default_factory=dict)
    paused: bool = False
    commits: list[dict[Partition, int]] = field(default_factory=list)
    fail_commits: int = 0
    #: raised by every poll while set (a source that fails, e.g. ``FatalSourceError``)
    poll_error: SourceError | None = None
    polls: int = 0
    _handler: RevokeHandler | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def append(self, topic: str, partition: int, values: Sequence[bytes]) -> None:
        with self._lock:
            self.partitions.setdefault((topic, partition), []).extend(values)

    def set_revoke_handler(self, handler: RevokeHandler) -> None:
        self._handler = handler

    def poll(self, timeout_seconds: float, max_records: int) -> list[RawMessage]:
        self.polls += 1
        if self.poll_error is not None:
            raise self.poll_error
        out: list[RawMessage] = []
        if self.paused:
            return out
        with self._lock:
            for part, values in sorted(self.partitions.items()):
                pos = self.position.get(part, self.committed.get(part, 0))
                take = values[pos:pos + max(0, max_records - len(out))]
                out.extend(RawMessage(part[0], part[1], pos + i, v) for i, v in enumerate(take))
                self.position[part] = pos + len(take)
        return out

    def commit(self, offsets: Mapping[Partition, int]) -> None:
        if self.fail_commits > 0:
            self.fail_commits -= 1
            raise RetryableSourceError("in-memory commit failure (test)")
        for part, off in offsets.items():
            if off < self.committed.get(part, 0):
                raise AssertionError(f"commit moved {part} backwards: {self.committed[part]} -> {off}")
            self.committed[part] = off
        self.commits.append(dict(offsets))

    def pause(self) -> None:
        self.paused = True

    def resume(self) -> None:
        self.paused = False

    def assignment(self) -> set[Partition]:
        return set(self.partitions)

    def lag(self) -> dict[Partition, int]:
        return {p: len(v) - self.position.get(p, self.committed.get(p, 0)) for p, v in self.partitions.items()}

    def crash(self) -> None:
        self.position.clear()

    def revoke(self, parts: set[Partition]) -> None:
        offsets = self._handler(parts) if self._handler else {}
        if offsets:
            self.commit(offsets)
        for p in parts:
            self.position.pop(p, None)

    def close(self) -> None:
        pass
