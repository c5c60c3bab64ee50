"""The score role's loops: Kafka consumer (live) and store backfill, both driving one ``LiveScorer``.

Owns building the scorer from settings (judge, sampler, telemetry), the consume → score → store → commit
loop with a stop event (SIGTERM sets it; the current batch is finished, stored and committed), and the
backfill over stored traces. ``ScoreRole`` is the score role for ``ragmon.daemon.Daemon``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

from ragmon.errors import RetryableSourceError, SourceError
from ragmon.judge import make_judge
from ragmon.sampling.sampler import ScoreSampler
from ragmon.score.pipeline import BatchResult, LiveScorer
from ragmon.score.sources import KafkaScoreSource, StoreScoreSource
from ragmon.telemetry import Telemetry

log = logging.getLogger(__name__)

Progress = Callable[[int, BatchResult], None]


def build_scorer(settings: Any, store: Any, telemetry: Telemetry, *, judge: Any = None,
                 sampler: ScoreSampler | None = None) -> LiveScorer:
    """A scorer with the judge and sampler the settings pin (either may be passed in instead)."""
    judge = judge or make_judge(settings.judge, telemetry)
    sampler = sampler or ScoreSampler.from_settings(settings.sampling)
    return LiveScorer(store, judge, sampler, telemetry, judge_attempts=settings.score.judge_attempts)


def backfill(scorer: LiveScorer, store: Any, since: datetime, until: datetime, *, page_size: int = 500,
             progress: Progress | None = None, stop: threading.Event | None = None) -> BatchResult:
    """Score stored traces with ``since <= ts < until``. Re-running it rewrites the same rows (idempotent)."""
    total = BatchResult()
    source = StoreScoreSource(store, since, until, page_size=page_size)
    read = 0
    for traces, key in source.batches():
        total.merge(scorer.process(traces, batch_key=key))
        read += len(traces)
        if progress:
            progress(read, total)
        if stop is not None and stop.is_set():
            break
    return total


def consume(scorer: LiveScorer, source: KafkaScoreSource, *, stop: threading.Event,
            max_traces: int | None = None, idle_exit_seconds: float | None = None,
            progress: Progress | None = None, clock: Callable[[], float] = time.monotonic,
            heartbeat: Callable[[], None] | None = None, max_batch: int = 500,
            flush_interval_seconds: float = 1.0) -> BatchResult:
    """Poll, buffer, score, store, commit until ``stop`` is set (or ``max_traces`` read, or idle long enough).

    Traces are buffered up to ``max_batch`` or ``flush_interval_seconds`` so inserts stay large and about one a
    second (what ClickHouse wants). Offsets are committed only after the buffer's rows are in the store; a
    crash in between re-scores it (rows are keyed by trace and fingerprint, so FINAL reads see each once).
    On stop the buffer is flushed and committed before returning.
    """
    total = BatchResult()
    read = 0
    last_data = clock()
    backoff = 0.5
    buffer: list[Any] = []
    keys: list[str] = []
    first_at = 0.0

    def flush() -> None:
        nonlocal read
        if keys:
            total.merge(scorer.process(buffer, batch_key=";".join(keys)))
            read += len(buffer)
            try:
                source.commit()
            except SourceError as exc:  # partitions moved in a rebalance: their new owner re-scores (rows dedup)
                log.warning("%s; the batch will be scored again by the partition's new owner", exc)
            buffer.clear()
            keys.clear()
            if progress:
                progress(read, total)

    while not stop.is_set():
        if heartbeat is not None:
            heartbeat()
        try:
            traces, key = source.poll()
        except RetryableSourceError as exc:
            log.warning("%s; retrying in %.1fs", exc, backoff)
            stop.wait(backoff)
            backoff = min(backoff * 2, 30.0)
            continue
        backoff = 0.5
        now = clock()
        if key is not None:
            if not keys:
                first_at = now
            buffer.extend(traces)
            keys.append(key)
            last_data = now
        if keys and (len(buffer) >= max_batch or now - first_at >= flush_interval_seconds or key is None
                     or (max_traces is not None and read + len(buffer) >= max_traces)):
            flush()
        if max_traces is not None and read >= max_traces:
            break
        if key is None and idle_exit_seconds is not None and now - last_data >= idle_exit_seconds:
            break
    flush()
    return total


class ScoreRole:
    """The score role for ``ragmon.daemon.Daemon`` (``ragmon score`` and ``ragmon run``).

    Built eagerly so a bad judge config or an unreachable broker fails at start-up, not later.
    """

    name = "score"

    def __init__(self, settings: Any, store: Any, telemetry: Telemetry, *, judge: Any = None,
                 sampler: ScoreSampler | None = None, max_traces: int | None = None,
                 idle_exit_seconds: float | None = None, progress: Progress | None = None):
        self.scorer = build_scorer(settings, store, telemetry, judge=judge, sampler=sampler)
        self.scorer.announce()
        self._settings = settings
        self.source: KafkaScoreSource | None = self._open_source()  # fails fast when the broker is unreachable
        self.max_traces, self.idle_exit_seconds, self.progress = max_traces, idle_exit_seconds, progress
        self.result = BatchResult()
        #: monotonic time the consume loop last polled (for /healthz)
        self.last_poll = time.monotonic()

    def _beat(self) -> None:
        self.last_poll = time.monotonic()

    def _open_source(self) -> KafkaScoreSource:
        s = self._settings
        return KafkaScoreSource(s.kafka, topic=s.score.topic or s.kafka.topic, group_id=s.score.group_id,
                                max_records=s.score.max_batch_traces, poll_timeout_seconds=s.score.poll_timeout_seconds)

    def run(self, stop: threading.Event) -> None:
        """Consume until stopped. After a crash the daemon calls this again: a fresh consumer joins the group."""
        source = self.source or self._open_source()
        self.source = None
        try:
            self.result.merge(consume(
                self.scorer, source, stop=stop, max_traces=self.max_traces, idle_exit_seconds=self.idle_exit_seconds,
                progress=self.progress, heartbeat=self._beat, max_batch=self._settings.score.max_batch_traces,
                flush_interval_seconds=self._settings.score.flush_interval_seconds))
        finally:
            source.close()
