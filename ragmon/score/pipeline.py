"""``LiveScorer``: trace → sampler → judge → the metrics library → ``scores`` and ``sampling_decisions`` rows.

Owns the three steps of scoring a trace: ``decide`` (a sampling decision row with its reason; a sampled trace
reserves its possible cost against the daily budget), ``start`` (the judge, in a ``JudgePool`` of up to
``max_in_flight`` calls: ``judge.scoring.score_trace``, the path the gate uses, with ``judge_attempts`` tries)
and ``write`` (the finished traces' rows with the judge fingerprint, two columnar inserts with deduplication
tokens, and a third of question types when a ``QuestionClassifier`` is given: it classifies each sampled trace
in the same pool slot as the judge, docs/coverage.md). ``process`` runs all three over one batch. A judge that still
fails — or returns verdicts the metrics reject — is written as ``status='failed'`` rows with the error and a NaN value:
a failure, never a score. Retryable store errors are retried with backoff, others propagate (the caller must not commit
those offsets). Which offsets may be committed is the caller's business (``ragmon.score.ledger``).
``decide``/``start``/``write`` belong to one thread (the loop); the judge calls run in the pool's.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import random
import time
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from ragmon.errors import JudgeError, RetryableStoreError
from ragmon.judge.base import Judge, JudgeInput
from ragmon.judge.classify import Classification, QuestionClassifier
from ragmon.judge.metrics import JudgeMetrics
from ragmon.judge.pool import JudgePool
from ragmon.judge.scoring import METRICS, TraceScores, score_trace
from ragmon.sampling.sampler import SamplingDecision, ScoreSampler
from ragmon.score import queries
from ragmon.score.metrics import ScoreMetrics
from ragmon.score.queries import ScoreStore
from ragmon.telemetry import Telemetry
from ragmon.tracing import span

log = logging.getLogger(__name__)

DECISION_COLUMNS = ("trace_id", "query_id", "ts", "decided_at", "retriever_name", "variant", "category", "sampler",
                    "decision", "rate")
#: the question-type classification of a scored trace (``question_types``, docs/coverage.md)
TYPE_COLUMNS = ("trace_id", "query_id", "ts", "classified_at", "retriever_name", "variant", "category", "question_type",
                "status", "error", "classifier_name", "classifier_fingerprint")
SCORE_COLUMNS = ("trace_id", "query_id", "ts", "scored_at", "retriever_name", "retriever_version", "variant",
                 "category", "metric", "value", "status", "error", "judge_name", "judge_fingerprint", "details")


@dataclass
class BatchResult:
    """What one round did: decisions by reason, traces scored and failed, metric sums per fingerprint."""

    decisions: Counter = field(default_factory=Counter)
    scored: int = 0
    failed: int = 0
    cost_usd: float = 0.0
    #: (fingerprint, metric) → [sum, n] of ok values, so a summary never mixes fingerprints
    sums: dict[tuple[str, str], list[float]] = field(default_factory=dict)

    def merge(self, other: BatchResult) -> None:
        self.decisions.update(other.decisions)
        self.scored += other.scored
        self.failed += other.failed
        self.cost_usd += other.cost_usd
        for key, (s, n) in other.sums.items():
            acc = self.sums.setdefault(key, [0.0, 0])
            acc[0] += s
            acc[1] += n


@dataclass(slots=True)
class Scoring:
    """One trace on its way through the scorer: its decision, then (if sampled) the judge's outcome."""

    item: JudgeInput
    meta: dict[str, Any]
    decision: SamplingDecision
    decided_at: datetime
    #: the trace itself while it waits for the judge (None once judged, and for traces not sampled)
    trace: Any = None
    #: scores, or the judge's error text; None until judged (and for traces not sampled)
    outcome: TraceScores | str | None = None
    scored_at: datetime | None = None
    #: the question type (``Classification``), or the classifier's error text; None without a classifier
    question_type: Classification | str | None = None


class LiveScorer:
    """Scores traces into the store. See the module docstring."""

    def __init__(self, store: ScoreStore, judge: Judge, sampler: ScoreSampler, telemetry: Telemetry | None = None, *,
                 judge_attempts: int = 2, store_attempts: int = 5, clock: Callable[[], float] = time.time,
                 sleep: Callable[[float], None] = time.sleep, max_in_flight: int = 1, pool: JudgePool | None = None,
                 classifier: QuestionClassifier | None = None):
        self.store = store
        #: classifies each sampled trace's question type in the same judge call slot (None: not classified)
        self.classifier = classifier
        self.judge = judge
        self.sampler = sampler
        self.telemetry = telemetry or Telemetry()
        #: live scoring's metrics and the judge's (the fingerprint in force, calls the judge does not count itself)
        self.metrics = self.telemetry.use(ScoreMetrics)
        self.judge_metrics = self.telemetry.use(JudgeMetrics)
        self.pool = pool or JudgePool.for_judge(judge, max_in_flight, self.telemetry)
        self.judge_attempts = judge_attempts
        self.store_attempts = store_attempts
        self._clock = clock
        self._sleep = sleep
        self.judge_metrics.judge_info.labels(judge.fingerprint, judge.name, judge.model or "-").set(1)
        # an HTTP judge counts its own calls (ok/retry/error per request); others are counted here per trace
        self._count_calls = getattr(judge, "metrics", None) is None

    def announce(self) -> str | None:
        """Log the fingerprint in force; warn when it differs from the last one this judge kind wrote (30 days).

        Returns the previous fingerprint when it changed (None otherwise).
        """
        previous = queries.last_fingerprint(self.store, self.judge.name)
        if previous is not None and previous != self.judge.fingerprint:
            log.warning("judge fingerprint changed: %s judge %s was %s. Scores of different fingerprints are never "
                        "compared; calibrate the new one with `ragmon calibrate --min-kappa`.", self.judge.name,
                        self.judge.fingerprint, previous)
            return previous
        log.info("judge %s (model %r) fingerprint %s", self.judge.name, self.judge.model, self.judge.fingerprint)
        return None

    def decide(self, trace: Any) -> Scoring:
        """The sampling decision for one trace (counted now; its row is written with the batch). A sampled trace
        reserves what its judgement may cost against the daily budget until it is judged."""
        item = JudgeInput.of(trace)
        estimate = getattr(self.judge, "estimate_cost_usd", None)
        decision = self.sampler.decide(item.query_id, item.retriever, item.category,
                                       cost_estimate=None if estimate is None else lambda: estimate(item))
        self.metrics.score_sampling_decisions.labels(decision.decision.value).inc()
        return Scoring(item, _meta(trace), decision, datetime.fromtimestamp(self._clock(), UTC),
                       trace if decision.sampled else None)

    def start(self, scoring: Scoring) -> Future[Scoring] | None:
        """Judge a sampled trace in the pool (None for one not sampled). The future's result is ``scoring``
        itself, with ``outcome`` set; the future never raises."""
        if not scoring.decision.sampled:
            return None
        return self.pool.submit(self._judge_one, scoring)

    def process(self, traces: Sequence[Any], *, batch_key: str | None = None) -> BatchResult:
        """Decide, judge (up to ``max_in_flight`` at once) and store one batch; ``batch_key`` (e.g.
        topic/partition/offsets) seeds the dedup tokens. Returns once the batch's rows are stored."""
        done = []
        for trace in traces:  # started as decided: an inline judge settles its cost before the next decision
            scoring = self.decide(trace)
            done.append((scoring, self.start(scoring)))
        for _, future in done:
            if future is not None:
                future.result()
        return self.write([scoring for scoring, _ in done], batch_key)

    def write(self, done: Sequence[Scoring], batch_key: str | None) -> BatchResult:
        """Store the rows of finished ``Scoring``s (every decision; scores of the sampled ones) in two inserts.
        Raises the store's error when it still fails after retries: then nothing of this batch may be committed.
        Traced as one span per batch (the judge calls have their own)."""
        with span("ragmon.score.batch", {"ragmon.batch.traces": len(done), "ragmon.judge.name": self.judge.name,
                                          "ragmon.judge.fingerprint": self.judge.fingerprint}) as current:
            result = self._write(done, batch_key)
            current.set_attributes({"ragmon.score.scored": result.scored, "ragmon.score.failed": result.failed,
                                    "ragmon.score.cost_usd": result.cost_usd})
            return result

    def _write(self, done: Sequence[Scoring], batch_key: str | None) -> BatchResult:
        result = BatchResult()
        decisions: dict[str, list[Any]] = {c: [] for c in DECISION_COLUMNS}
        scores: dict[str, list[Any]] = {c: [] for c in SCORE_COLUMNS}
        fp = self.judge.fingerprint
        for s in done:
            item, meta, decision = s.item, s.meta, s.decision
            for col, value in zip(DECISION_COLUMNS, (
                item.trace_id, item.query_id, meta["ts"], s.decided_at, item.retriever, item.variant, item.category,
                self.sampler.name, decision.decision.value, decision.rate,
            ), strict=True):
                decisions[col].append(value)
            result.decisions[decision.decision.value] += 1
            outcome = s.outcome
            if outcome is None:
                continue
            if isinstance(outcome, TraceScores):
                result.scored += 1
                result.cost_usd += outcome.usage.cost_usd
                rows = [(v.metric, v.value, "ok" if v.value is not None else "not_applicable", "", v.details)
                        for v in outcome.values]
                for metric, value, _, _, _ in rows:
                    if value is not None:
                        acc = result.sums.setdefault((fp, metric), [0.0, 0])
                        acc[0] += value
                        acc[1] += 1
            else:
                result.failed += 1
                rows = [(metric, None, "failed", outcome, {}) for metric in METRICS]
            for metric, value, status, error, details in rows:
                for col, v in zip(SCORE_COLUMNS, (
                    item.trace_id, item.query_id, meta["ts"], s.scored_at or s.decided_at, item.retriever,
                    meta["retriever_version"],
                    item.variant, item.category, metric, math.nan if value is None else float(value), status,
                    error, self.judge.name, fp, json.dumps(details, sort_keys=True),
                ), strict=True):
                    scores[col].append(v)
        self._insert("sampling_decisions", decisions, batch_key)
        self._insert("scores", scores, batch_key)
        if self.classifier is not None:
            self._insert("question_types", self._type_columns(done), batch_key)
        self.metrics.score_traces_scored.inc(result.scored)
        self.metrics.score_failures.inc(result.failed)
        self.metrics.score_last_batch.set(self._clock())
        return result

    def _type_columns(self, done: Sequence[Scoring]) -> dict[str, list[Any]]:
        columns: dict[str, list[Any]] = {c: [] for c in TYPE_COLUMNS}
        assert self.classifier is not None
        for s in done:
            if s.question_type is None:
                continue
            ok = isinstance(s.question_type, Classification)
            label, error = (s.question_type.label, "") if ok else ("", str(s.question_type))
            for col, v in zip(TYPE_COLUMNS, (
                s.item.trace_id, s.item.query_id, s.meta["ts"], s.scored_at or s.decided_at, s.item.retriever,
                s.item.variant, s.item.category, label, "ok" if ok else "failed", error, self.classifier.name,
                self.classifier.fingerprint), strict=True):
                columns[col].append(v)
        return columns

    def close(self) -> None:
        """Abandon judge calls still queued (see ``JudgePool.close``)."""
        self.pool.close()

    def _judge_one(self, scoring: Scoring) -> Scoring:
        if self.classifier is not None:
            scoring.question_type = self._classify(scoring.item)
        outcome = self._judge(scoring.trace)
        scoring.outcome, scoring.trace = outcome, None  # the trace is not needed any more: let it go
        scoring.scored_at = datetime.fromtimestamp(self._clock(), UTC)
        cost = outcome.usage.cost_usd if isinstance(outcome, TraceScores) else 0.0
        self.sampler.settle(scoring.decision.reserved_usd, cost if math.isfinite(cost) and cost >= 0 else 0.0)
        return scoring

    def _judge(self, trace: Any) -> TraceScores | str:
        """Scores, or the error text after ``judge_attempts`` tries (permanent errors are not retried)."""
        error = ""
        for attempt in range(1, self.judge_attempts + 1):
            try:
                scores = score_trace(self.judge, trace)
                self._counted("ok")
                return scores
            except JudgeError as exc:
                self._counted("retry" if exc.retryable and attempt < self.judge_attempts else "error")
                error = str(exc)
                if not exc.retryable:
                    break
            except ValueError as exc:  # impossible verdicts (e.g. relevance 3.0): the judge is broken
                self._counted("error")
                error = f"the judge returned verdicts the metrics reject: {exc}"
                break
            except Exception as exc:  # noqa: BLE001 - one bad trace must not stop the loop; unknown is permanent
                self._counted("error")
                log.exception("judge %s crashed on a trace", self.judge.name)
                error = f"internal error in the {self.judge.name} judge: {type(exc).__name__}: {exc}"
                break
            if attempt < self.judge_attempts:
                self._sleep(min(30.0, 2.0 ** attempt) * random.random())
        return error[:2000] or "judge failed"

    def _classify(self, item: JudgeInput) -> Classification | str:
        """The question type, or the error text: a failed classification is a row, never a guessed label."""
        assert self.classifier is not None
        try:
            return self.classifier.classify(item)
        except JudgeError as exc:
            return str(exc)[:2000] or "classifier failed"
        except Exception as exc:  # noqa: BLE001 - one bad trace must not stop the loop; unknown is permanent
            log.exception("classifier %s crashed on a trace", self.classifier.name)
            return f"internal error in the {self.classifier.name} classifier: {type(exc).__name__}: {exc}"

    def _counted(self, outcome: str) -> None:
        if self._count_calls:
            self.judge_metrics.judge_calls.labels(self.judge.name, outcome).inc()

    def _insert(self, table: str, columns: dict[str, list[Any]], batch_key: str | None) -> None:
        if not columns["trace_id"]:
            return
        token = None
        if batch_key:
            token = hashlib.sha256(f"{table}|{self.judge.fingerprint}|{batch_key}".encode()).hexdigest()
        for attempt in range(1, self.store_attempts + 1):
            try:
                self.store.insert_columns(table, columns, dedup_token=token)
                return
            except RetryableStoreError:
                if attempt == self.store_attempts:
                    raise
                self._sleep(min(30.0, 0.5 * 2 ** attempt) * (0.5 + random.random() / 2))


def _meta(trace: Any) -> dict[str, Any]:
    get = (lambda o, n: o.get(n)) if isinstance(trace, dict) else (lambda o, n: getattr(o, n, None))
    ts = get(trace, "timestamp")
    if isinstance(ts, str):
        ts = datetime.fromisoformat(ts.replace("Z", "+00:00").replace("z", "+00:00"))
    if isinstance(ts, datetime) and ts.tzinfo is None:
        ts = ts.replace(tzinfo=UTC)
    retriever = get(trace, "retriever")
    version = (retriever.get("version") if isinstance(retriever, dict) else getattr(retriever, "version", "")) or ""
    return {"ts": ts, "retriever_version": version}
