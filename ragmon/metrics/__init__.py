"""Evaluation metrics: pure functions (no I/O, no clock), shared by the offline gate and the live scorer.

Retrieval metrics take a ranked list of chunk ids and golden judgments; generation metrics take judge verdicts
(``ragmon.metrics.verdicts``); cost metrics take per-query token, cost and latency records. Every function's
docstring ends with what it does NOT catch.
"""

from ragmon.metrics.cost import (
    CostRecord,
    CostReport,
    CostSummary,
    cost_by_stratum,
    percentile,
    summarise_cost,
)
from ragmon.metrics.generation import (
    RefusalCause,
    RefusalOutcome,
    RefusalResult,
    answer_relevance,
    citation_precision,
    citation_recall,
    claim_sentences,
    classify_refusal,
    faithfulness,
    refusal_causes,
    refusal_correctness,
    refusal_outcome,
    verify_citation,
)
from ragmon.metrics.quotes import normalise_for_quote, verify_quote
from ragmon.metrics.retrieval import (
    context_precision,
    dedupe,
    duplicate_ratio_at_k,
    first_correct_rank,
    hit_at_k,
    ndcg_at_k,
    permission_leak_count,
    precision_at_k,
    recall_at_k,
    reciprocal_rank,
    unique_parents_at_k,
)
from ragmon.metrics.summary import RankingScores, mean_defined, score_ranking
from ragmon.metrics.verdicts import (
    ChunkRelevance,
    CitationVerdict,
    ClaimVerdict,
    Evidence,
    RefusalVerdict,
    Verdicts,
)

__all__ = [
    "ChunkRelevance",
    "CitationVerdict",
    "ClaimVerdict",
    "CostRecord",
    "CostReport",
    "CostSummary",
    "Evidence",
    "RankingScores",
    "RefusalCause",
    "RefusalOutcome",
    "RefusalResult",
    "RefusalVerdict",
    "Verdicts",
    "answer_relevance",
    "citation_precision",
    "citation_recall",
    "claim_sentences",
    "classify_refusal",
    "context_precision",
    "cost_by_stratum",
    "dedupe",
    "duplicate_ratio_at_k",
    "faithfulness",
    "first_correct_rank",
    "hit_at_k",
    "mean_defined",
    "ndcg_at_k",
    "normalise_for_quote",
    "percentile",
    "permission_leak_count",
    "precision_at_k",
    "recall_at_k",
    "reciprocal_rank",
    "refusal_causes",
    "refusal_correctness",
    "refusal_outcome",
    "score_ranking",
    "summarise_cost",
    "unique_parents_at_k",
    "verify_citation",
    "verify_quote",
]
