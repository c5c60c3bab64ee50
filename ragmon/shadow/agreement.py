"""Ranking agreement between two ranked lists of chunk ids: Jaccard overlap@k, rank-biased overlap, top-1
agreement and Kendall tau on the shared items.

These are the reference definitions. ``ragmon.shadow.pairs`` computes the same numbers inside ClickHouse for
millions of pairs, and the tests check that both agree. Pure: no I/O, no clock.

Conventions (shared with the SQL):

* A duplicate chunk id counts once, at its first position (``dedupe``), as in ``ragmon.metrics.retrieval``.
* Only the first ``k`` items of each list are compared.
* Two empty lists agree perfectly (Jaccard 1, RBO 1); an empty list against a non-empty one agrees not at all.
* Top-1 agreement is ``None`` when both lists are empty; Kendall tau is ``None`` with fewer than two shared
  items (a rank correlation of one item is undefined, and a made-up number would bias the mean).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

#: default persistence of rank-biased overlap: the weight of the first 10 ranks is about 86% of the total
DEFAULT_RBO_P = 0.9


def _check_k(k: int) -> int:
    if isinstance(k, bool) or not isinstance(k, int) or k <= 0:
        raise ValueError(f"k must be a positive integer, got {k!r}")
    return k


def dedupe(ranked: Iterable[str]) -> list[str]:
    """The list with later duplicates removed, order kept."""
    seen: set[str] = set()
    out: list[str] = []
    for item in ranked:
        if item not in seen:
            seen.add(item)
            out.append(item)
    return out


def top_k(ranked: Iterable[str], k: int) -> list[str]:
    return dedupe(ranked)[: _check_k(k)]


def jaccard_at_k(a: Sequence[str], b: Sequence[str], k: int) -> float:
    """|A ∩ B| / |A ∪ B| over the top-k sets, in [0, 1]."""
    sa, sb = set(top_k(a, k)), set(top_k(b, k))
    union = sa | sb
    return 1.0 if not union else len(sa & sb) / len(union)


def rank_biased_overlap(a: Sequence[str], b: Sequence[str], k: int, p: float = DEFAULT_RBO_P) -> float:
    """Rank-biased overlap truncated at depth D = min(k, longer list), normalized so identical lists give 1.

    RBO@D = (1 - p) / (1 - p^D) · Σ_{d=1..D} p^(d-1) · |A[:d] ∩ B[:d]| / d. Agreement near the top weighs more
    (persistence ``p`` in (0, 1)); the normalization makes the value a weighted mean of the prefix overlaps,
    so it lies in [0, 1] whatever the depth.
    """
    if not 0.0 < p < 1.0:
        raise ValueError(f"RBO persistence p must be in (0, 1), got {p!r}")
    ta, tb = top_k(a, k), top_k(b, k)
    depth = max(len(ta), len(tb))
    if depth == 0:
        return 1.0
    total = 0.0
    for d in range(1, depth + 1):
        total += p ** (d - 1) * len(set(ta[:d]) & set(tb[:d])) / d
    return min(1.0, max(0.0, (1 - p) / (1 - p**depth) * total))


def top1_agreement(a: Sequence[str], b: Sequence[str]) -> bool | None:
    """Whether both lists rank the same chunk first; ``None`` when both are empty."""
    if not a and not b:
        return None
    return bool(a) and bool(b) and a[0] == b[0]


def kendall_tau_shared(a: Sequence[str], b: Sequence[str], k: int) -> float | None:
    """Kendall tau-a between the orders the two lists give the items they share in their top k.

    1 when the shared items appear in the same order, -1 when reversed; ``None`` with fewer than 2 shared.
    """
    ta, tb = top_k(a, k), top_k(b, k)
    pos_b = {item: i for i, item in enumerate(tb)}
    ranks = [pos_b[item] for item in ta if item in pos_b]
    n = len(ranks)
    if n < 2:
        return None
    score = 0
    for i in range(n):
        for j in range(i + 1, n):
            score += 1 if ranks[j] > ranks[i] else -1
    return score / (n * (n - 1) / 2)
