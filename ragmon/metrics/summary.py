"""Per-query retrieval scores bundled for the gate and the live scorer, and the mean that skips ``None``.

One call of :func:`score_ranking` computes every retrieval metric of one query at the cut-offs in force, so the
offline gate and the live scorer cannot drift apart in how they call the metric functions. Pure: no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from ragmon.metrics.retrieval import (
    check_k,
    dedupe,
    first_correct_rank,
    hit_at_k,
    ndcg_at_k,
    recall_at_k,
    reciprocal_rank,
)

__all__ = ["RankingScores", "mean_defined", "score_ranking"]


@dataclass(frozen=True, slots=True)
class RankingScores:
    """Retrieval metrics of one query, with the cut-offs applied (``k`` and the second depth)."""

    k: int
    depth: int
    recall_at_k: float | None
    recall_at_depth: float | None
    hit_at_k: float | None
    reciprocal_rank_at_k: float | None
    ndcg_at_k: float | None
    first_correct_rank: int | None

    def as_dict(self) -> dict[str, float | int | None]:
        return {
            "recall_at_k": self.recall_at_k,
            "recall_at_depth": self.recall_at_depth,
            "hit_at_k": self.hit_at_k,
            "reciprocal_rank_at_k": self.reciprocal_rank_at_k,
            "ndcg_at_k": self.ndcg_at_k,
            "first_correct_rank": self.first_correct_rank,
        }


def score_ranking(ranked: Sequence[str], grades: Mapping[str, int], k: int, depth: int | None = None) -> RankingScores:
    """Every retrieval metric of one query. ``grades``: chunk id → 0–3 (relevant = grade ≥ 1).

    The reciprocal rank is taken over the top ``k`` so that asking for a deeper ``depth`` does not change it;
    ``first_correct_rank`` looks at the whole ranking given.

    Does NOT catch: anything the individual metrics miss (see their docstrings); it only bundles them.
    """
    check_k(k)
    depth = k if depth is None else check_k(depth)
    if depth < k:
        raise ValueError(f"depth must be >= k, got depth={depth} < k={k}")
    relevant = {c for c, g in grades.items() if g >= 1}
    return RankingScores(
        k=k,
        depth=depth,
        recall_at_k=recall_at_k(ranked, relevant, k),
        recall_at_depth=recall_at_k(ranked, relevant, depth),
        hit_at_k=hit_at_k(ranked, relevant, k),
        reciprocal_rank_at_k=reciprocal_rank(dedupe(ranked)[:k], relevant),
        ndcg_at_k=ndcg_at_k(ranked, grades, k),
        first_correct_rank=first_correct_rank(ranked, relevant),
    )


def mean_defined(values: Iterable[float | None]) -> float | None:
    """Arithmetic mean of the values that are not None; None when there are none.

    Does NOT catch: spread — a mean of 0.8 can be every query at 0.8 or a fifth of them at 0. Look at the
    per-query values and the worst stratum as well.
    """
    total = 0.0
    n = 0
    for v in values:
        if v is not None:
            if not math.isfinite(v):
                raise ValueError(f"cannot average a non-finite value: {v!r}")
            total += v
            n += 1
    return total / n if n else None
