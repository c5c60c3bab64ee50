"""The score role's loops: Kafka consumer (live) and store backfill, both driving one ``LiveScorer``.

Owns building the scorer from settings (judge, sampler, telemetry, ``judge.max_in_flight``), the backfill over
stored traces (the live loop's sliding window over the store's pages: never waiting for a page's slowest call),
and ``ScoreRole``, the score role for
``ragmon.daemon.Daemon``, which runs the live loop (``ragmon.score.consume``) with a stop event: SIGTERM sets it,
and the loop drains what it can within half the shutdown grace period, stores it and commits what is safe. The
role keeps the loop's last ``ConsumerState`` (``consumer_state``) for ``--exit-when-idle``.
"""

from __future__ import annotations

import logging
import threading
import time
from datetime import datetime
from typing import Any

from ragmon.contracts.redact import Redactor
from ragmon.daemon import ConsumerState
from ragmon.judge import make_judge
from ragmon.judge.classify_openai import make_classifier
from ragmon.sampling.sampler import ScoreSampler
from ragmon.score.consume import Progress, consume
from ragmon.score.pipeline import BatchResult, LiveScorer
from ragmon.score.queries import ScoreStore
from ragmon.score.sources import KafkaScoreSource, StoreScoreSource
from ragmon.telemetry import Telemetry

__all__ = ["ScoreRole", "backfill", "build_scorer", "consume"]

log = logging.getLogger(__name__)


def build_scorer(settings: Any, store: ScoreStore, telemetry: Telemetry, *, judge: Any = None,
                 sampler: ScoreSampler | None = None) -> LiveScorer:
    """A scorer with the judge and sampler the settings pin (either may be passed in instead)."""
    judge = judge or make_judge(settings.judge, telemetry)
    sampler = sampler or ScoreSampler.from_settings(settings.sampling)
    classifier = None
    coverage = getattr(settings, "coverage", None)
    if coverage is not None and coverage.enabled:
        classifier = make_classifier(settings.judge, coverage.question_types, coverage.classifier)
    return LiveScorer(store, judge, sampler, telemetry, judge_attempts=settings.score.judge_attempts,
                      max_in_flight=settings.judge.max_in_flight, classifier=classifier)


def backfill(scorer: LiveScorer, store: ScoreStore, since: datetime, until: datetime, *, page_size: int = 500,
             progress: Progress | None = None, stop: threading.Event | None = None,
             flush_interval_seconds: float = 1.0, only_failed: bool = False) -> BatchResult:
    """Score stored traces with ``since <= ts < until`` (``only_failed``: only those whose scores by this scorer's
    judge are stored as failed, e.g. after a judge outage). Re-running it rewrites the same rows (idempotent).

    Through the live loop's sliding window (``consume`` over ``StoreScoreSource``): pages are read as the judges
    have room (twice ``max_in_flight`` judged or waiting, plus one page), rows are written as judgements finish
    (up to ``page_size`` at once, or every ``flush_interval_seconds``), so one slow call never holds the judges
    idle until its page is done. ``stop``: stop reading, finish the calls in flight, write, return."""
    source = StoreScoreSource(store, since, until, page_size=page_size,
                              failed_of=scorer.judge.fingerprint if only_failed else None)
    return consume(scorer, source, stop=stop or threading.Event(), until=lambda: source.exhausted,
                   progress=progress, max_batch=page_size, flush_interval_seconds=flush_interval_seconds,
                   drain_seconds=float("inf"))


class ScoreRole:
    """The score role for ``ragmon.daemon.Daemon`` (``ragmon score`` and ``ragmon run``).

    Built eagerly so a bad judge config or an unreachable broker fails at start-up, not later.
    """

    name = "score"

    def __init__(self, settings: Any, store: ScoreStore, telemetry: Telemetry, *, judge: Any = None,
                 sampler: ScoreSampler | None = None, max_traces: int | None = None, progress: Progress | None = None):
        self.scorer = build_scorer(settings, store, telemetry, judge=judge, sampler=sampler)
        self.scorer.announce()
        self._settings = settings
        self.source: KafkaScoreSource | None = self._open_source()  # fails fast when the broker is unreachable
        self.max_traces, self.progress = max_traces, progress
        self.result = BatchResult()
        #: monotonic time the consume loop last polled (for /healthz)
        self.last_poll = time.monotonic()
        #: the consume loop's progress after its last step (read from another thread: ``--exit-when-idle``)
        self.consumer_state = ConsumerState()

    def _beat(self) -> None:
        self.last_poll = time.monotonic()

    def _publish(self, state: ConsumerState) -> None:
        self.consumer_state = state

    def _open_source(self) -> KafkaScoreSource:
        s = self._settings
        redactor = Redactor(s.ingest.redact_patterns, s.ingest.redact_fields, s.ingest.redact_attributes)
        return KafkaScoreSource(s.kafka, topic=s.score.topic or s.kafka.topic, group_id=s.score.group_id,
                                max_records=s.score.max_batch_traces, poll_timeout_seconds=s.score.poll_timeout_seconds,
                                redact=redactor.trace)

    def run(self, stop: threading.Event) -> None:
        """Consume until stopped. After a crash the daemon calls this again: a fresh consumer joins the group."""
        source = self.source or self._open_source()
        self.source = None
        try:
            self.result.merge(consume(
                self.scorer, source, stop=stop, max_traces=self.max_traces, publish=self._publish,
                progress=self.progress, heartbeat=self._beat, max_batch=self._settings.score.max_batch_traces,
                flush_interval_seconds=self._settings.score.flush_interval_seconds,
                # the other half of the grace period is for the last write, the commit and closing the consumer
                drain_seconds=self._settings.process.shutdown_grace_seconds / 2))
        finally:
            source.close()
