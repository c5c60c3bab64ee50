"""Verdicts → per-trace metric values, through the metrics library: the one path the gate and the live scorer share.

``score_verdicts`` calls ``ragmon.metrics`` (faithfulness, citation precision and recall, answer relevance,
context precision, refusal outcome and cause) on a judge's verdicts and returns ``MetricValue`` records; a
metric with nothing to score is None (never 0). ``score_trace`` runs a judge and then ``score_verdicts``.
No I/O of its own (the judge may do HTTP), no clock, no store.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ragmon.judge.base import Judge, JudgeInput, Usage
from ragmon.metrics import (
    answer_relevance,
    citation_precision,
    citation_recall,
    claim_sentences,
    classify_refusal,
    context_precision,
    faithfulness,
    refusal_correctness,
    refusal_outcome,
)
from ragmon.metrics.verdicts import Verdicts

#: every metric the live scorer writes, in report order
METRICS = (
    "faithfulness", "citation_precision", "citation_recall", "answer_relevance", "context_precision",
    "context_relevant_share", "refusal_correct", "wrong_refusal", "missed_refusal",
)  # fmt: skip


#: metrics where a higher value is worse (rates of wrong decisions); every other metric is better higher
LOWER_IS_BETTER = frozenset({"wrong_refusal", "missed_refusal"})


@dataclass(frozen=True, slots=True)
class MetricValue:
    """One metric of one trace. ``value`` None: not applicable (e.g. no citations to judge)."""

    metric: str
    value: float | None
    details: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class TraceScores:
    """A trace's metric values under one judge fingerprint, with what the judgement cost."""

    trace_id: str
    judge_name: str
    judge_fingerprint: str
    values: tuple[MetricValue, ...]
    usage: Usage
    verdicts: Verdicts

    def value(self, metric: str) -> float | None:
        return next((v.value for v in self.values if v.metric == metric), None)


def score_trace(judge: Judge, trace: Any, retrieval_scores: list[float] | None = None) -> TraceScores:
    """Judge one trace and compute its metrics. Raises what the judge raises (``JudgeError``)."""
    item = JudgeInput.of(trace)
    judgement = judge.assess(item)
    if retrieval_scores is None:
        retrieval_scores = _scores_of(trace)
    values = score_verdicts(item, judgement.verdicts, retrieval_scores)
    return TraceScores(item.trace_id, judge.name, judgement.verdicts.judge_fingerprint, values, judgement.usage,
                       judgement.verdicts)


def score_verdicts(item: JudgeInput, v: Verdicts, retrieval_scores: list[float]) -> tuple[MetricValue, ...]:
    """The metric values of one trace. Raises ``ValueError`` if the verdicts are impossible (a broken judge)."""
    supported = sum(1 for c in v.claims if c.supported is True)
    unverified = sum(1 for c in v.claims if c.evidence and not any(e.verified for e in c.evidence))
    needs = claim_sentences(v.claims, v.sentences)
    holds = sum(1 for c in v.citations if c.holds)
    bad_quotes = sum(1 for c in v.citations if not c.quote_verified)

    judged = {c.chunk_id: c.relevant for c in v.chunks}
    relevant = {cid for cid, ok in judged.items() if ok}
    ranked = [c.chunk_id for c in item.chunks if c.chunk_id in judged]

    actual = v.observed_behaviour or item.behaviour
    # a retrieval-only trace (a shadow twin that skips generation) answered nothing: there is no answer to rate
    # and no refusal decision to judge, so those metrics are not applicable rather than 0 or 1
    retrieval_only = actual == "answer" and not item.answer.strip()
    if v.refusal.answerable is None or retrieval_only:
        expected = None
    elif v.refusal.answerable:
        expected = "answer"
    else:  # the judge says "should not answer": any way of declining (refuse, clarify, route) is correct
        expected = actual if actual != "answer" else "refuse"
    outcome = refusal_outcome(expected, actual)
    rates = refusal_correctness([outcome])
    cause = classify_refusal(actual, retrieval_scores, min_score=0.0,
                             evidence_found=bool(relevant) if judged else None)
    refusal_details = {"expected": expected, "actual": actual, "reported_behaviour": item.behaviour,
                       "outcome": outcome.value, "cause": cause.value}
    correct = None if expected is None else float(outcome.value in ("correct_answer", "correct_decline"))

    return (
        MetricValue("faithfulness", faithfulness(v.claims),
                    {"claims": len(v.claims), "supported": supported, "unverified_evidence": unverified}),
        MetricValue("citation_precision", citation_precision(v.citations),
                    {"citations": len(v.citations), "hold": holds, "quote_not_found": bad_quotes}),
        MetricValue("citation_recall",
                    citation_recall(v.citations, len(v.sentences), needs if needs or not v.claims else None),
                    {"sentences": len(v.sentences), "need_citation": len(needs)}),
        MetricValue("answer_relevance", None if retrieval_only else answer_relevance(v),
                    {"retrieval_only": True} if retrieval_only else {}),
        MetricValue("context_precision", context_precision(ranked, relevant) if judged else None,
                    {"judged": len(judged), "relevant": len(relevant)}),
        MetricValue("context_relevant_share", len(relevant) / len(judged) if judged else None,
                    {"judged": len(judged), "relevant": len(relevant)}),
        MetricValue("refusal_correct", correct, refusal_details),
        MetricValue("wrong_refusal", rates.wrong_refusal_rate, refusal_details),
        MetricValue("missed_refusal", rates.missed_refusal_rate, refusal_details),
    )


def _scores_of(trace: Any) -> list[float]:
    retrieved = trace.get("retrieved") if isinstance(trace, dict) else getattr(trace, "retrieved", None)
    out = []
    for r in retrieved or []:
        score = r.get("score") if isinstance(r, dict) else getattr(r, "score", None)
        if isinstance(score, int | float):
            out.append(float(score))
    return out
