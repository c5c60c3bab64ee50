"""Generation in the gate: retrieve, answer, build a trace.v1 document, score it on the live scorer's path.

For each golden case (answerable or not: refusal correctness needs every case) the answerer gets the top ``k``
retrieved chunks with their texts, its output becomes a trace.v1 document (validated against the contract), and
``ragmon.judge.scoring.score_trace(judge, trace)`` — the very call the live scorer makes — turns it into metric
values under the judge's fingerprint. Refusal correctness is decided against the golden case's
``expected_behaviour``, not the judge's opinion. Whatever the answerer, ``chunk_text`` or the judge does wrong
on one case is recorded for that case and the run goes on. Answerers run one at a time in the calling thread;
judging runs up to ``judge.max_in_flight`` cases at once (``JudgePool``), results kept in case order. This module
owns the calls and the clock; the metrics and the judge stay where they are.
"""

from __future__ import annotations

import hashlib
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from pydantic import ValidationError

from ragmon.contracts.golden import GoldenCase
from ragmon.contracts.trace import Trace
from ragmon.errors import JudgeError
from ragmon.gate.answerer import (
    Answerer,
    AnswererOutputError,
    ChunkText,
    Generated,
    Passage,
    normalise_answer,
)
from ragmon.gate.runner import CaseRun, Retriever, RetrieverOutputError, describe, normalise_output
from ragmon.judge.base import Judge, Usage
from ragmon.judge.pool import JudgePool
from ragmon.judge.scoring import TraceScores, score_trace
from ragmon.metrics import classify_refusal, refusal_outcome

#: consecutive cases the judge may fail on before the rest of the run is not judged at all
JUDGE_FAILURES_TO_STOP = 3


@dataclass(frozen=True, slots=True)
class GenerationSetup:
    """What every case of one run shares."""

    retriever: Retriever
    answerer: Answerer
    chunk_text: ChunkText
    judge: Judge
    k: int
    depth: int
    retriever_name: str
    corpus_snapshot: str
    now: datetime


@dataclass(frozen=True, slots=True)
class GenerationRun:
    """One case through the answerer and the judge. ``error`` set: nothing was scored for it."""

    case_id: str
    category: str
    expected_behaviour: str
    behaviour: str | None = None  # what the system did (the judge's reading when it saw a refusal as an answer)
    outcome: str | None = None  # refusal_outcome against the golden expected_behaviour
    refusal_cause: str | None = None  # for a decline of an answerable case: retrieval or generation?
    values: dict[str, float | None] = field(default_factory=dict)
    generate_ms: float | None = None
    usage: Usage = Usage()
    trace: dict[str, Any] | None = None
    error: str | None = None
    judge_failed: bool = False  # the error is the judge's (endpoint down, bad key), not the system's


def trace_id(case_id: str) -> str:
    text = f"gate:{case_id}"
    return text if len(text) <= 256 else "gate:sha256:" + hashlib.sha256(case_id.encode()).hexdigest()


def build_trace(case: GoldenCase, setup: GenerationSetup, ranking: tuple[str, ...], scores: tuple[float, ...] | None,
                texts: dict[str, str], out: Generated, latency_ms: dict[str, float]) -> dict[str, Any]:  # fmt: skip
    """The trace.v1 document a production system would have sent for this case (checked against the contract).

    trace.v1 requires a score per retrieved chunk: a retriever that returns bare ids gets 0.0 and the attribute
    ``ragmon.gate.retriever_scores=none`` says so.
    """
    doc: dict[str, Any] = {
        "trace_id": trace_id(case.id),
        "query_id": case.id,
        "timestamp": setup.now.isoformat(),
        "retriever": {"name": setup.retriever_name[-256:], "variant": "production",
                      "parameters": {"k": setup.k, "depth": setup.depth}},  # fmt: skip
        "corpus_snapshot": setup.corpus_snapshot,
        "question": case.question,
        "category": case.category,
        "retrieved": [{"chunk_id": cid, "score": scores[i] if scores else 0.0, "rank": i + 1, "text": texts.get(cid)}
                      for i, cid in enumerate(ranking)],  # fmt: skip
        "context": {"chunk_ids": list(out.context)},
        "answer": out.answer,
        "behaviour": out.behaviour,
        "citations": list(out.citations),
        "latency_ms": latency_ms,
        "attributes": {"ragmon.gate.case_id": case.id[:10_000],
                       "ragmon.gate.retriever_scores": "returned" if scores else "none"},  # fmt: skip
    }
    Trace.model_validate(doc)  # raises ValidationError: the answerer's output does not fit trace.v1
    return doc


def _texts(chunk_text: ChunkText, ids: tuple[str, ...]) -> dict[str, str]:
    texts = {}
    for cid in ids:
        text = chunk_text(cid)
        if not isinstance(text, str):
            raise AnswererOutputError(f"chunk_text({cid!r}) returned {type(text).__name__}; expected the chunk's text")
        texts[cid] = text
    return texts


def _retrieve(case: GoldenCase, run: CaseRun, setup: GenerationSetup,
              clock: Callable[[], float]) -> tuple[tuple[str, ...], tuple[float, ...] | None,
                                                   float | None]:  # fmt: skip
    """The ranking to answer from: the retrieval run's, or (for cases excluded from retrieval scoring) a new call."""
    if not run.excluded:
        if run.error is not None:
            raise _Skip(f"retrieval failed, nothing to answer from ({run.error})")
        return run.ranking, run.scores, run.latency_ms
    started = clock()
    try:
        ids, scores, _ = normalise_output(setup.retriever(case.question, setup.depth), setup.depth)
    except (Exception, SystemExit) as exc:
        why = f"returned garbage: {exc}" if isinstance(exc, RetrieverOutputError) else describe(exc)
        raise _Skip(f"retriever: {why}") from None
    return ids, scores, (clock() - started) * 1000.0


class _Skip(Exception):
    """This case cannot be generated or scored; the message says why."""

    def __init__(self, message: str, generate_ms: float | None = None):
        super().__init__(message)
        self.generate_ms = generate_ms


class _JudgeFailed(_Skip):
    """The judge, not the system under test, failed on this case."""


@dataclass(frozen=True, slots=True)
class _Answered:
    """A case answered and turned into a trace, waiting for the judge."""

    ranking: tuple[str, ...]
    scores: tuple[float, ...] | None
    out: Generated
    trace: dict[str, Any]
    generate_ms: float


def _score(setup: GenerationSetup, answered: _Answered) -> TraceScores:
    try:
        return score_trace(setup.judge, answered.trace)  # the live scorer's call
    except JudgeError as exc:
        raise _JudgeFailed(f"judge failed: {exc}", answered.generate_ms) from None
    except ValueError as exc:
        raise _JudgeFailed(f"the judge returned verdicts the metrics reject: {exc}", answered.generate_ms) from None
    except Exception as exc:  # noqa: BLE001 - one case must not stop the run; unknown is recorded, not hidden
        raise _JudgeFailed(f"internal error in the {setup.judge.name} judge: {describe(exc)}",
                           answered.generate_ms) from None


def _answer(case: GoldenCase, run: CaseRun, setup: GenerationSetup, clock: Callable[[], float]) -> _Answered:
    """Retrieve (or reuse the retrieval), call the answerer, build the trace; ``_Skip`` saying what went wrong."""
    ranking, scores, retrieve_ms = _retrieve(case, run, setup, clock)
    given = ranking[: setup.k]
    try:
        texts = _texts(setup.chunk_text, given)
    except AnswererOutputError as exc:
        raise _Skip(str(exc)) from None
    except (Exception, SystemExit) as exc:
        raise _Skip(f"chunk_text: {describe(exc)}") from None
    started = clock()
    try:
        out = normalise_answer(setup.answerer(case.question, [Passage(c, texts[c]) for c in given]), given)
        generate_ms = (clock() - started) * 1000.0
    except AnswererOutputError as exc:
        raise _Skip(f"answerer returned garbage: {exc}") from None
    except (Exception, SystemExit) as exc:  # user code: one bad case must not stop the run
        raise _Skip(f"answerer: {describe(exc)}") from None
    latency = {"retrieve": retrieve_ms or 0.0, "generate": generate_ms}
    try:
        trace = build_trace(case, setup, ranking, scores, texts, out, latency)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()[:3])
        raise _Skip(f"answerer output does not fit trace.v1: {problems}", generate_ms) from None
    return _Answered(ranking, scores, out, trace, generate_ms)


def _failed(case: GoldenCase, exc: _Skip) -> GenerationRun:
    return GenerationRun(case.id, case.category, str(case.expected_behaviour), generate_ms=exc.generate_ms,
                         error=str(exc)[:500], judge_failed=isinstance(exc, _JudgeFailed))


def _scored(case: GoldenCase, answered: _Answered, scored: TraceScores, k: int) -> GenerationRun:
    out, scores = answered.out, answered.scores
    given = answered.ranking[:k]
    actual = scored.verdicts.observed_behaviour or out.behaviour
    relevant = case.relevant_chunks()
    cause = None
    if relevant and actual != "answer":  # a decline of an answerable case: was the evidence in what it was given?
        found = any(c in relevant for c in out.context)
        shortlist = list(scores[: len(given)]) if scores else [0.0] * len(given)  # only its emptiness counts here
        cause = classify_refusal(actual, shortlist, min_score=0.0, evidence_found=found).value
    return GenerationRun(
        case.id, case.category, str(case.expected_behaviour),
        behaviour=actual,
        outcome=refusal_outcome(case.expected_behaviour, actual).value,
        refusal_cause=cause,
        values={v.metric: v.value for v in scored.values},
        generate_ms=answered.generate_ms,
        usage=scored.usage,
        trace=answered.trace,
    )


def generate_case(case: GoldenCase, run: CaseRun, setup: GenerationSetup,
                  clock: Callable[[], float] = time.perf_counter) -> GenerationRun:  # fmt: skip
    """Retrieve (or reuse the retrieval), answer, score one case; errors are recorded on the result."""
    try:
        answered = _answer(case, run, setup, clock)
        return _scored(case, answered, _score(setup, answered), setup.k)
    except _Skip as exc:
        return _failed(case, exc)


def generate_cases(cases: Sequence[GoldenCase], runs: Sequence[CaseRun], setup: GenerationSetup, *,
                   clock: Callable[[], float] = time.perf_counter,
                   on_case: Callable[[GenerationRun], None] | None = None,
                   max_in_flight: int = 1) -> list[GenerationRun]:  # fmt: skip
    """Every case (with its retrieval run, same order) answered in this thread, one after the other (answerers
    are user code, not assumed thread-safe), and judged up to ``max_in_flight`` at once.

    Results are recorded, and ``on_case`` called, in case order. After the judge failed on
    ``JUDGE_FAILURES_TO_STOP`` cases in a row (an unreachable endpoint, a revoked key) the remaining cases are
    recorded as not judged instead of each waiting out the judge's retry deadline — the same cases as one at a
    time, since the rule reads the results in order (cases answered ahead of that point are not judged either).
    """
    pool = JudgePool.for_judge(setup.judge, max_in_flight)
    window = 2 * pool.max_in_flight if pool.threaded and pool.max_in_flight > 1 else 1  # 1: strictly in turn
    out: list[GenerationRun] = []
    ahead: deque[tuple[GoldenCase, _Answered | GenerationRun, Future[TraceScores] | None]] = deque()
    stopped: str | None = None

    def record(case: GoldenCase, result: GenerationRun | None) -> None:
        nonlocal stopped
        if stopped is not None or result is None:
            result = GenerationRun(case.id, case.category, str(case.expected_behaviour), judge_failed=True,
                                   error=stopped)  # fmt: skip
        out.append(result)
        if on_case is not None:
            on_case(result)
        recent = out[-JUDGE_FAILURES_TO_STOP:]
        if stopped is None and len(recent) == JUDGE_FAILURES_TO_STOP and all(r.judge_failed for r in recent):
            stopped = (f"not judged: the judge failed on {JUDGE_FAILURES_TO_STOP} cases in a row "
                       f"(last: {recent[-1].error})")[:500]  # fmt: skip

    def settle_oldest() -> None:
        case, answered, future = ahead.popleft()
        if future is None:
            record(case, answered)  # type: ignore[arg-type] - a case that failed before the judge
            return
        try:
            record(case, _scored(case, answered, future.result(), setup.k))  # type: ignore[arg-type]
        except _Skip as exc:
            record(case, _failed(case, exc))

    try:
        for case, run in zip(cases, runs, strict=True):
            if stopped is not None:
                record(case, None)
                continue
            try:
                answered = _answer(case, run, setup, clock)
            except _Skip as exc:
                ahead.append((case, _failed(case, exc), None))
            else:
                ahead.append((case, answered, pool.submit(_score, setup, answered)))
            while len(ahead) >= window or (ahead and ahead[0][2] is not None and ahead[0][2].done()):
                settle_oldest()
        while ahead:
            settle_oldest()
    finally:
        pool.close()
    return out
