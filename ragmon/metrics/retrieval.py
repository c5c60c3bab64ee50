"""Retrieval metrics for one query: pure functions of a ranked list of chunk ids and the golden judgments.

Conventions shared by every function here (the gate and the live scorer rely on them):

* ``ranked`` is a sequence of chunk ids, best first. A duplicate id counts once, at its first position; later
  copies are dropped before anything is counted, so they neither earn credit nor push other items down.
* No relevant items for the query → ``None``, never 0 or 1: such a query has nothing to find, and averaging a
  made-up number into a mean hides that. Callers skip ``None`` when they average.
* Fewer than ``k`` results is allowed: the missing positions simply hold nothing relevant.
* ``k <= 0`` (or a non-integer k) raises ``ValueError`` saying so.
* Relevance is binary for recall, hit, precision, reciprocal rank and context precision (a chunk is relevant when
  it is in ``relevant``; from a golden case that is grade ≥ 1), and graded 0–3 for nDCG. This matches trec_eval's
  default ``relevance_level`` of 1, and the tests check every function against trec_eval itself.

No I/O, no clock, no globals: the gate runs these offline and the live scorer online.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Mapping, Sequence

__all__ = [
    "context_precision",
    "dedupe",
    "duplicate_ratio_at_k",
    "first_correct_rank",
    "hit_at_k",
    "ndcg_at_k",
    "permission_leak_count",
    "precision_at_k",
    "recall_at_k",
    "reciprocal_rank",
    "unique_parents_at_k",
]


def check_k(k: int) -> int:
    """``k`` if it is a positive integer; ``ValueError`` naming the bad value otherwise."""
    if isinstance(k, bool) or not isinstance(k, int):
        raise ValueError(f"k must be a positive integer, got {k!r} ({type(k).__name__})")
    if k <= 0:
        raise ValueError(f"k must be a positive integer (k >= 1), got {k}")
    return k


def dedupe(ranked: Iterable[str]) -> list[str]:
    """The ranking with repeated ids removed, each id kept at its first position.

    Does NOT catch: near-duplicates under different ids (two chunks with the same text, or the same passage in
    two document versions) — see :func:`duplicate_ratio_at_k` for a parent-document view.
    """
    return list(dict.fromkeys(ranked))  # dicts keep insertion order: first position wins


def _as_set(items: Collection[str]) -> set[str] | frozenset[str]:
    return items if isinstance(items, set | frozenset) else set(items)  # read-only use: no copy needed


def _top(ranked: Sequence[str], k: int) -> list[str]:
    check_k(k)
    top = list(dict.fromkeys(ranked[:k]))
    if len(top) < k and len(ranked) > k:  # duplicates in the first k: later items move up
        top = dedupe(ranked)[:k]
    return top


def recall_at_k(ranked: Sequence[str], relevant: Collection[str], k: int) -> float | None:
    """Share of the relevant chunks found in the top ``k`` (the gate's "coverage"); None if none are relevant.

    Does NOT catch: how much irrelevant material arrived with the relevant chunks (a retriever returning fifty
    chunks scores well), nor a chunk from a superseded document version whose id still matches, nor whether the
    chunks can answer the question together.
    """
    check_k(k)
    wanted = _as_set(relevant)
    if not wanted:
        return None
    return len(wanted.intersection(_top(ranked, k))) / len(wanted)


def hit_at_k(ranked: Sequence[str], relevant: Collection[str], k: int) -> float | None:
    """1.0 if at least one relevant chunk is in the top ``k``, else 0.0; None if none are relevant.

    Does NOT catch: questions that need several passages — one of three found counts as a full hit. Read it next
    to :func:`recall_at_k`.
    """
    check_k(k)
    wanted = _as_set(relevant)
    if not wanted:
        return None
    return 0.0 if wanted.isdisjoint(_top(ranked, k)) else 1.0


def precision_at_k(ranked: Sequence[str], relevant: Collection[str], k: int) -> float | None:
    """Relevant chunks in the top ``k`` divided by ``k`` (trec_eval's P@k); None if none are relevant.

    The denominator is ``k`` even when fewer than k results came back: empty slots hold nothing relevant. A query
    with one relevant chunk can therefore score at most 1/k.

    Does NOT catch: what was missed (perfect precision over one of three needed chunks is a half-answer), nor
    near-duplicates, which all count as relevant while carrying one fact.
    """
    check_k(k)
    wanted = _as_set(relevant)
    if not wanted:
        return None
    return len(wanted.intersection(_top(ranked, k))) / k


def first_correct_rank(ranked: Sequence[str], relevant: Collection[str]) -> int | None:
    """1-based rank of the first relevant chunk (after de-duplication); None if none is retrieved or none exists.

    Does NOT catch: anything after the first hit, and it cannot tell "nothing relevant exists" from "missed":
    use :func:`hit_at_k` for that. Average it only over hits.
    """
    wanted = _as_set(relevant)
    if not wanted:
        return None
    for index, item in enumerate(ranked):
        if item in wanted:
            return len(set(ranked[:index])) + 1  # its rank once earlier duplicates are dropped
    return None


def reciprocal_rank(ranked: Sequence[str], relevant: Collection[str]) -> float | None:
    """1 / rank of the first relevant chunk; 0.0 when none is retrieved; None if none are relevant.

    Pass ``ranked[:k]`` for the reciprocal rank at a cut-off (the gate does, so MRR reads at the k you use).

    Does NOT catch: everything after the first hit — a question answerable only by combining two passages is
    scored as solved when one is found.
    """
    if not relevant:
        return None
    rank = first_correct_rank(ranked, relevant)
    return 0.0 if rank is None else 1.0 / rank


def _check_grades(grades: Mapping[str, float]) -> None:
    for chunk, grade in grades.items():
        if not isinstance(grade, int | float) or isinstance(grade, bool) or not math.isfinite(grade) or grade < 0:
            raise ValueError(f"relevance grade of {chunk!r} must be a finite number >= 0, got {grade!r}")


def _dcg(gains: Iterable[float]) -> float:
    return sum(g / math.log2(i + 2) for i, g in enumerate(gains) if g)


def ndcg_at_k(ranked: Sequence[str], grades: Mapping[str, float], k: int) -> float | None:
    """Normalised discounted cumulative gain at ``k`` with graded relevance (golden grades 0–3).

    Gain is linear in the grade and the discount is log2(rank + 1), as in trec_eval's ``ndcg_cut``:
    DCG@k = Σ_{r=1..k} grade(r) / log2(r + 1), divided by the DCG@k of the ideal ordering of all judged chunks.
    Unjudged chunks have grade 0. None when no chunk has a grade above 0. Negative grades raise ``ValueError``.

    Does NOT catch: bad grades (nDCG is exactly as good as the labels behind it), and difficulty — every query is
    scored against its own ideal, so a query whose ideal is one mediocre passage can score 1. Report the
    distribution and the worst stratum, not only the mean.
    """
    check_k(k)
    _check_grades(grades)
    ideal = sorted((g for g in grades.values() if g > 0), reverse=True)[:k]
    if not ideal:
        return None
    get = grades.get
    dcg = _dcg([get(item, 0) for item in _top(ranked, k)])
    return dcg / _dcg(ideal)


def context_precision(ranked: Sequence[str], relevant: Collection[str]) -> float | None:
    """Rank-weighted precision of the retrieved list (the Ragas definition).

    Σ_r precision@r · rel(r) divided by the number of relevant chunks retrieved, over the whole (de-duplicated)
    ranking: an irrelevant chunk at rank 1 costs more than one at rank 5. 0.0 when nothing relevant is retrieved;
    None when nothing is relevant. Pass ``ranked[:k]`` for a cut-off.

    Does NOT catch: what was not retrieved (one relevant chunk at rank 1 and nothing else scores 1.0 even if
    three were needed), and near-duplicates, which all count as relevant. Read it with recall.
    """
    wanted = _as_set(relevant)
    if not wanted:
        return None
    hits = 0
    total = 0.0
    for rank, item in enumerate(dedupe(ranked), start=1):
        if item in wanted:
            hits += 1
            total += hits / rank
    return total / hits if hits else 0.0


def unique_parents_at_k(ranked: Sequence[str], parents: Mapping[str, str], k: int) -> int:
    """Number of distinct parent documents among the top ``k`` chunks.

    ``parents`` maps chunk id → parent document id; a chunk missing from it (or with an empty parent) counts as
    its own parent, so unknown parentage never merges chunks.

    Does NOT catch: the same passage copied into different documents (a PDF export and its source), nor whether
    the distinct documents are relevant.
    """
    return len({parents.get(item) or f"\0{item}" for item in _top(ranked, k)})


def duplicate_ratio_at_k(ranked: Sequence[str], parents: Mapping[str, str], k: int) -> float | None:
    """Share of the top ``k`` chunks that repeat an earlier chunk's parent document: 1 − unique parents / chunks.

    0.0 means every chunk comes from a different document; near 1 means the context carries one document many
    times. None when the ranking is empty (nothing to be duplicated).

    Does NOT catch: duplication across documents (see :func:`unique_parents_at_k`), and it penalises the
    legitimate case where one long document really holds several needed passages.
    """
    top = _top(ranked, k)
    if not top:
        return None
    return 1.0 - unique_parents_at_k(top, parents, k) / len(top)


def permission_leak_count(
    ranked: Sequence[str], owners: Mapping[str, str | None], allowed: Collection[str], k: int | None = None
) -> int:
    """Chunks in the top ``k`` (all when k is None) whose owning tenant is not in ``allowed``.

    ``owners`` maps chunk id → tenant; a chunk with no known tenant is not counted (it cannot be judged), so feed
    every chunk's tenant for the count to mean anything. The target is zero at every k.

    Does NOT catch: leaks through chunks with no tenant label, leaks in the generated answer from the model's
    own memory, or scopes finer than a tenant (a document one colleague may read and another may not).
    """
    allowed_set = set(allowed)
    items = dedupe(ranked) if k is None else _top(ranked, k)
    return sum(1 for item in items if (owner := owners.get(item)) and owner not in allowed_set)
