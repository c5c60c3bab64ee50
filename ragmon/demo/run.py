"""``ragmon demo``: the scenario pushed through the real pipeline stages on the embedded store.

Stages, each the production code path (only the Kafka consumer is replaced by its in-memory twin, since the
demo runs without external services): decode → validate → redact → batch → ClickHouse insert → commit
(``IngestPipeline``, which counts permission leaks on every trace), deterministic sampling → heuristic judge → metric
functions → ``scores`` (``LiveScorer``), a drift check with the aggregation in ClickHouse (``DriftChecker``), the weekly
review selection (``select_week``), the shadow comparison (``compare``) and the leak listing (``list_leaks``),
question-type coverage, the A/B comparison, the thumbs-down triage queue (``demo.triage``) and judge drift over the
history weeks with simulated reviewers (``demo.judge_drift``). Returns a ``DemoResult``; printing is the CLI's job.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from ragmon.ab.compare import AbOptions, AbResult, Arm
from ragmon.ab.compare import compare as ab_compare
from ragmon.config import DriftSettings, DriftWindowSettings, SamplingSettings, Settings
from ragmon.contracts.golden import GoldenCase
from ragmon.coverage.check import CoverageResult, check_coverage
from ragmon.coverage.stats import CoverageThresholds
from ragmon.demo.judge_drift import JudgeDriftDemo, run_judge_drift
from ragmon.demo.scenario import (
    CANDIDATE,
    PRODUCTION,
    Scenario,
    generate,
    generate_history,
    generate_outcomes,
)
from ragmon.demo.traffic import generate_golden
from ragmon.demo.triage import TriageDemo, run_triage
from ragmon.drift.check.check import CheckResult, DriftChecker
from ragmon.golden_files import write_golden
from ragmon.judge.base import JudgeInput
from ragmon.judge.classify import HeuristicClassifier
from ragmon.leaks.listing import LeakListing, list_leaks
from ragmon.metrics.permissions import LeakRule
from ragmon.outcomes.loop import OutcomeLoop
from ragmon.pipeline.loop import IngestPipeline
from ragmon.pipeline.metrics import IngestMetrics
from ragmon.pipeline.writer import StoreTraceWriter
from ragmon.review.queries import ClickHouseReviewQueries
from ragmon.review.selection import SelectionResult, iso_week, select_week
from ragmon.score.pipeline import BatchResult
from ragmon.score.runner import backfill, build_scorer
from ragmon.shadow.compare import CompareOptions, compare
from ragmon.shadow.pairs import RetrieverRef
from ragmon.shadow.result import ComparisonResult
from ragmon.shadow.verdict import Thresholds
from ragmon.store import ClickHouseStore
from ragmon.stream.dead_letter import InMemoryDeadLetterSink
from ragmon.stream.dead_letter_file import FileDeadLetterSink
from ragmon.stream.source import InMemoryTraceSource
from ragmon.telemetry import Telemetry

TOPIC = "rag.traces"
PARTITIONS = 3
#: malformed messages mixed into the stream, to show dead-lettering next to valid neighbours
BAD_MESSAGES = (
    b'{"trace_id": "bad-1", "query_id": ',
    b'{"trace_id": "bad-2", "query_id": "q", "timestamp": "2026-01-01T00:00:00Z", "retriever": {"name": "r"},'
    b' "question": "q", "retrieved": [{"chunk_id": "c", "score": NaN, "rank": 1}]}',
    b'{"trace_id": "bad-3", "query_id": "q", "timestamp": "2026-01-01T00:00:00Z", "retriever": {"name": "r"},'
    b' "question": 42}',
)

#: stage name, done, total
Progress = Callable[[str, int, int], None]


@dataclass
class DemoResult:
    scenario: Scenario
    now: datetime
    produced: int
    stored: int
    dead_letters: dict[str, int]
    redactions: int
    ingest_seconds: float
    scored: BatchResult
    score_seconds: float
    drift: CheckResult
    review: SelectionResult
    shadow: ComparisonResult
    coverage: CoverageResult | None = None
    ab: AbResult | None = None
    timings: dict[str, float] = field(default_factory=dict)
    leaks: LeakListing | None = None
    triage: TriageDemo | None = None
    judge_drift: JudgeDriftDemo | None = None


def demo_settings(base: Settings, sample_rate: float) -> Settings:
    """The demo's windows and sampling: two days of traffic, the last 6 hours (the incident) against the day
    before them."""
    drift = DriftSettings(
        interval_seconds=base.drift.interval_seconds,
        windows=DriftWindowSettings(current_seconds=6 * 3600, reference="trailing", reference_days=1, same_hours=False),
        min_samples=100,
    )
    sampling = SamplingSettings(salt=base.sampling.salt, rate=sample_rate)
    return base.model_copy(update={"drift": drift, "sampling": sampling})


def run_demo(settings: Settings, store: ClickHouseStore, telemetry: Telemetry, scenario: Scenario, *,
             progress: Progress = lambda stage, done, total: None, golden_path: Path | None = None,
             dead_letter_path: Path | None = None) -> DemoResult:
    """Generate, ingest, score and check the scenario's traffic. ``golden_path``: where to write the golden set
    the coverage step compares with traffic (so ``ragmon golden coverage --golden`` can repeat it);
    ``dead_letter_path``: where to write the dead letters (JSON Lines, as ``ingest --dead-letter-file`` does), so
    the console's Dead letters page can show them."""
    now = datetime.now(UTC)
    timings: dict[str, float] = {}

    t0 = time.perf_counter()
    traces = generate(scenario, now)
    history = generate_history(scenario, now)
    messages = [json.dumps(t, separators=(",", ":")).encode() for t in history + traces]
    timings["generate"] = time.perf_counter() - t0
    progress("generate", len(messages), len(messages))

    t0 = time.perf_counter()
    dead = _ingest(settings, store, telemetry, messages, progress, dead_letter_path)
    ingest_seconds = time.perf_counter() - t0
    stored = store.row_count("traces")

    t0 = time.perf_counter()
    scorer = build_scorer(settings, store, telemetry)
    since = scenario.history_week_starts(now)[0] if history else scenario.start(now) - timedelta(minutes=1)
    scored = backfill(scorer, store, since, now + timedelta(minutes=1),
                      page_size=1000, progress=lambda done, _r: progress("score", done, len(messages)))
    score_seconds = time.perf_counter() - t0

    t0 = time.perf_counter()
    drift = DriftChecker(store, settings.drift, telemetry, clock=lambda: now + timedelta(seconds=1)).run_once()
    timings["drift"] = time.perf_counter() - t0
    progress("drift", 1, 1)

    t0 = time.perf_counter()
    review = select_week(ClickHouseReviewQueries(store), iso_week(now), 50, seed=f"demo-{scenario.seed}",
                         stratify=True, min_per_stratum=5, now=now, selected_by="demo")
    timings["review"] = time.perf_counter() - t0
    progress("review", 1, 1)

    t0 = time.perf_counter()
    shadow = compare(store, _shadow_options(scenario, now))
    timings["shadow"] = time.perf_counter() - t0
    progress("shadow", 1, 1)

    leaks = list_leaks(store, LeakRule.sharing(settings.ingest.shared_tenants), since=scenario.start(now)
                       - timedelta(minutes=1), until=now + timedelta(minutes=1), limit=20)  # fmt: skip

    t0 = time.perf_counter()
    coverage = _coverage(settings, store, scenario, traces, now, golden_path)
    timings["coverage"] = time.perf_counter() - t0
    progress("coverage", 1, 1)

    t0 = time.perf_counter()
    ab = _ab(settings, store, scenario, traces, now)
    timings["ab"] = time.perf_counter() - t0
    progress("ab", 1, 1)

    t0 = time.perf_counter()
    triage = run_triage(store, scenario, traces, now)
    timings["triage"] = time.perf_counter() - t0
    progress("triage", 1, 1)

    t0 = time.perf_counter()
    judge_drift = run_judge_drift(store, settings.drift.judge_agreement, telemetry, scenario, history + traces, now)
    timings["judge"] = time.perf_counter() - t0
    progress("judge", 1, 1)

    redactions = int(sum(s.value for m in telemetry.use(IngestMetrics).ingest_redactions.collect() for s in m.samples
                         if s.name.endswith("_total")))
    return DemoResult(scenario, now, len(messages), stored, dead, redactions, ingest_seconds, scored, score_seconds,
                      drift, review, shadow, coverage, ab, timings, leaks, triage, judge_drift)


def _ingest(settings: Settings, store: ClickHouseStore, telemetry: Telemetry, messages: list[bytes],
            progress: Progress, dead_letter_path: Path | None) -> dict[str, int]:
    source = InMemoryTraceSource()
    stream = list(messages)
    for i, bad in enumerate(BAD_MESSAGES):  # malformed messages between valid neighbours
        stream.insert((i + 1) * len(stream) // (len(BAD_MESSAGES) + 1), bad)
    for p in range(PARTITIONS):
        source.append(TOPIC, p, stream[p::PARTITIONS])
    total = len(stream)
    letters = InMemoryDeadLetterSink()
    pipeline = IngestPipeline(source, StoreTraceWriter(store), letters, settings.ingest, telemetry,
                              input_format="native", retention_days=settings.store.traces_ttl_days)
    stop = threading.Event()
    worker = threading.Thread(target=pipeline.run, args=(stop,), name="demo-ingest", daemon=True)
    worker.start()
    try:
        while worker.is_alive():
            done = sum(source.committed.values())
            progress("ingest", done, total)
            if done >= total:
                break
            time.sleep(0.1)
    finally:
        stop.set()
        worker.join(30)
    progress("ingest", sum(source.committed.values()), total)
    if dead_letter_path is not None:
        file = FileDeadLetterSink(dead_letter_path)
        try:
            file.send(letters.letters)
        finally:
            file.close()
    reasons: dict[str, int] = {}
    for letter in letters.letters:
        reasons[letter.reason] = reasons.get(letter.reason, 0) + 1
    return reasons


def coverage_golden(traces: list[dict], until: datetime, question_types: Sequence[str],
                    every: int = 10) -> list[GoldenCase]:
    """A golden set refreshed from the first day's logs: every ``every``-th production trace before ``until``,
    tagged with its question type by the same rules that classify live traffic."""
    classifier = HeuristicClassifier(question_types)
    cases = []
    production = [t for t in traces if t["retriever"]["variant"] == "production"
                  and datetime.fromisoformat(t["timestamp"]) < until]
    by_stratum: dict[str, list[dict]] = {}
    for trace in production:
        by_stratum.setdefault(trace["category"], []).append(trace)
    for trace in (t for group in by_stratum.values() for t in group[::every]):
        answer = trace["behaviour"] == "answer" and trace["context"]["chunk_ids"]
        docs = {r["chunk_id"]: r["doc_id"] for r in trace["retrieved"]}
        passages = [{"doc_id": docs.get(c, "doc"), "chunk_ids": [c]} for c in trace["context"]["chunk_ids"][:2]]
        cases.append(GoldenCase.model_validate({
            "id": f"demo-coverage-{trace['query_id']}", "question": trace["question"], "category": trace["category"],
            "expected_behaviour": "answer" if answer else "refuse", "reference_passages": passages if answer else [],
            "source": "ragmon demo: the first day's logs",
            "tags": [classifier.classify(JudgeInput.of(trace)).label],
        }))
    return cases


def _coverage(settings: Settings, store: ClickHouseStore, scenario: Scenario, traces: list[dict],
              now: datetime, golden_path: Path | None) -> CoverageResult:
    c = settings.coverage
    golden = coverage_golden(traces, scenario.new_type_start(now), c.question_types)
    if golden_path is not None:
        write_golden(golden_path, golden)
    return check_coverage(store, golden, c.question_types, until=now + timedelta(minutes=1),
                          window=timedelta(hours=scenario.new_type_hours),
                          thresholds=CoverageThresholds.of(c))


def _ab(settings: Settings, store: ClickHouseStore, scenario: Scenario, traces: list[dict],
        now: datetime) -> AbResult:
    """Outcome events through the outcome loop (the in-memory twin of their topic), then the A/B comparison."""
    source = InMemoryTraceSource()
    source.append("rag.outcomes", 0, [json.dumps(e).encode() for e in generate_outcomes(scenario, traces)])
    loop = OutcomeLoop(source, store, InMemoryDeadLetterSink(), settings.ab)
    loop.run(threading.Event(), until=lambda: source.lag() == {("rag.outcomes", 0): 0} and loop.idle())
    return ab_compare(store, AbOptions.of(
        settings.ab, Arm(PRODUCTION.name, PRODUCTION.version, "production"),
        Arm(CANDIDATE.name, CANDIDATE.version, "canary"), scenario.canary_start(now), now + timedelta(minutes=1)))


def _shadow_options(scenario: Scenario, now: datetime) -> CompareOptions:
    golden = generate_golden(scenario.n_queries, scenario.strata, scenario.seed, every=3, hostile_every=97)
    return CompareOptions(
        baseline=RetrieverRef(PRODUCTION.name, PRODUCTION.version, "production"),
        candidate=RetrieverRef(CANDIDATE.name, CANDIDATE.version, "shadow"),
        since=scenario.start(now) - timedelta(minutes=1), until=now + timedelta(minutes=1), k=10,
        thresholds=Thresholds(min_pairs=100, max_latency_p95_delta_ms=25.0,
                              max_quality_drop={"recall_at_k": 0.02, "ndcg_at_k": 0.02}),
        golden=[GoldenCase.model_validate(c) for c in golden], n_resamples=500, seed=scenario.seed,
    )
