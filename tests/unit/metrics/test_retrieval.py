"""Retrieval metrics: known answers by hand, the defined edge cases, and Hypothesis properties."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ragmon.metrics import (
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

RANKED = ["x", "a", "y", "b", "z"]
RELEVANT = {"a", "b", "c"}


def test_known_answers_by_hand() -> None:
    assert recall_at_k(RANKED, RELEVANT, 2) == pytest.approx(1 / 3)
    assert recall_at_k(RANKED, RELEVANT, 5) == pytest.approx(2 / 3)
    assert hit_at_k(RANKED, RELEVANT, 1) == 0.0
    assert hit_at_k(RANKED, RELEVANT, 2) == 1.0
    assert precision_at_k(RANKED, RELEVANT, 4) == pytest.approx(2 / 4)
    assert reciprocal_rank(RANKED, RELEVANT) == pytest.approx(1 / 2)
    assert first_correct_rank(RANKED, RELEVANT) == 2
    # Ragas context precision: (P@2·1 + P@4·1) / 2 hits = (1/2 + 2/4) / 2
    assert context_precision(RANKED, RELEVANT) == pytest.approx(0.5)


def test_ndcg_linear_gain_log2_discount_by_hand() -> None:
    grades = {"a": 3, "b": 1, "c": 2}
    # DCG@3 of [x, a, y] = 3 / log2(3); ideal [3, 2, 1] = 3 + 2/log2(3) + 1/2
    expected = (3 / math.log2(3)) / (3 + 2 / math.log2(3) + 0.5)
    assert ndcg_at_k(RANKED, grades, 3) == pytest.approx(expected)
    assert ndcg_at_k(["a", "c", "b"], grades, 3) == pytest.approx(1.0)
    # ideal is cut at k too: a perfect top 1 scores 1 at k=1 whatever follows
    assert ndcg_at_k(["a"], grades, 1) == pytest.approx(1.0)


def test_no_relevant_items_is_none_not_zero() -> None:
    for value in (
        recall_at_k(RANKED, set(), 3),
        hit_at_k(RANKED, [], 3),
        precision_at_k(RANKED, (), 3),
        reciprocal_rank(RANKED, set()),
        context_precision(RANKED, set()),
        first_correct_rank(RANKED, set()),
        ndcg_at_k(RANKED, {}, 3),
        ndcg_at_k(RANKED, {"a": 0, "b": 0}, 3),  # judged but nothing relevant
    ):
        assert value is None


def test_misses_are_zero_not_none() -> None:
    assert recall_at_k(["x"], {"a"}, 3) == 0.0
    assert reciprocal_rank([], {"a"}) == 0.0
    assert ndcg_at_k([], {"a": 2}, 3) == 0.0
    assert context_precision(["x", "y"], {"a"}) == 0.0
    assert first_correct_rank(["x"], {"a"}) is None


@pytest.mark.parametrize("k", [0, -1, 1.5, True, "3"])
def test_bad_k_raises_saying_so(k: object) -> None:
    for fn in (recall_at_k, hit_at_k, precision_at_k):
        with pytest.raises(ValueError, match="k must be a positive integer"):
            fn(RANKED, RELEVANT, k)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="k must be a positive integer"):
        ndcg_at_k(RANKED, {"a": 1}, k)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="k must be a positive integer"):
        unique_parents_at_k(RANKED, {}, k)  # type: ignore[arg-type]


def test_bad_k_raises_even_without_relevant_items() -> None:
    with pytest.raises(ValueError, match="k >= 1"):
        recall_at_k(RANKED, set(), 0)


def test_duplicates_count_once_at_first_position() -> None:
    ranked = ["a", "a", "a", "b"]
    assert dedupe(ranked) == ["a", "b"]
    # without de-duplication b would sit at rank 4 and miss k=2; with it, b is rank 2
    assert recall_at_k(ranked, {"a", "b"}, 2) == 1.0
    assert precision_at_k(ranked, {"a"}, 2) == pytest.approx(1 / 2)  # a counts once
    assert ndcg_at_k(["a", "a"], {"a": 3, "b": 3}, 2) == pytest.approx(3 / (3 + 3 / math.log2(3)))
    assert first_correct_rank(["x", "x", "b"], {"b"}) == 2


def test_fewer_than_k_results() -> None:
    assert recall_at_k(["a"], {"a"}, 10) == 1.0
    assert precision_at_k(["a"], {"a"}, 10) == pytest.approx(0.1)  # trec_eval P@k divides by k
    assert ndcg_at_k(["a"], {"a": 3}, 10) == pytest.approx(1.0)
    assert hit_at_k([], {"a"}, 10) == 0.0


def test_negative_grade_raises() -> None:
    with pytest.raises(ValueError, match="grade"):
        ndcg_at_k(["a"], {"a": -1}, 3)
    with pytest.raises(ValueError, match="grade"):
        ndcg_at_k(["a"], {"a": float("nan")}, 3)


def test_parents_and_duplicate_ratio() -> None:
    parents = {"d1#1": "d1", "d1#2": "d1", "d2#1": "d2"}
    ranked = ["d1#1", "d1#2", "d2#1", "orphan"]
    assert unique_parents_at_k(ranked, parents, 2) == 1
    assert unique_parents_at_k(ranked, parents, 4) == 3  # the orphan is its own parent
    assert duplicate_ratio_at_k(ranked, parents, 2) == pytest.approx(0.5)
    assert duplicate_ratio_at_k(ranked, parents, 4) == pytest.approx(0.25)
    assert duplicate_ratio_at_k([], parents, 4) is None


def test_permission_leaks() -> None:
    owners = {"a": "acme", "b": "globex", "c": None}
    assert permission_leak_count(["a", "b", "c"], owners, {"acme"}) == 1
    assert permission_leak_count(["a", "b", "c"], owners, {"acme"}, k=1) == 0
    assert permission_leak_count(["b", "b"], owners, set()) == 1  # duplicates once


ids = st.sampled_from([f"c{i}" for i in range(12)])
rankings = st.lists(ids, max_size=20)
relevant_sets = st.sets(ids, min_size=1, max_size=6)
ks = st.integers(min_value=1, max_value=25)
grade_maps = st.dictionaries(ids, st.integers(min_value=0, max_value=3), max_size=8)


@given(rankings, relevant_sets, ks)
def test_bounds(ranked: list[str], relevant: set[str], k: int) -> None:
    for value in (
        recall_at_k(ranked, relevant, k),
        hit_at_k(ranked, relevant, k),
        precision_at_k(ranked, relevant, k),
        reciprocal_rank(ranked, relevant),
        context_precision(ranked, relevant),
    ):
        assert value is not None and 0.0 <= value <= 1.0


@given(rankings, grade_maps, ks)
def test_ndcg_bounds(ranked: list[str], grades: dict[str, int], k: int) -> None:
    value = ndcg_at_k(ranked, grades, k)
    if any(g > 0 for g in grades.values()):
        assert value is not None and 0.0 <= value <= 1.0 + 1e-12
    else:
        assert value is None


@given(rankings, relevant_sets, ks)
def test_recall_and_hit_monotone_in_k(ranked: list[str], relevant: set[str], k: int) -> None:
    assert recall_at_k(ranked, relevant, k) <= recall_at_k(ranked, relevant, k + 1)  # type: ignore[operator]
    assert hit_at_k(ranked, relevant, k) <= hit_at_k(ranked, relevant, k + 1)  # type: ignore[operator]


@given(rankings, relevant_sets, ks, st.randoms())
def test_invariant_to_order_of_relevant_set(ranked: list[str], relevant: set[str], k: int, rnd) -> None:  # type: ignore[no-untyped-def]
    shuffled = list(relevant)
    rnd.shuffle(shuffled)
    assert recall_at_k(ranked, relevant, k) == recall_at_k(ranked, shuffled, k)
    assert reciprocal_rank(ranked, relevant) == reciprocal_rank(ranked, tuple(shuffled))
    assert precision_at_k(ranked, relevant, k) == precision_at_k(ranked, shuffled, k)


@given(rankings, relevant_sets, ks)
def test_repeating_items_changes_nothing(ranked: list[str], relevant: set[str], k: int) -> None:
    doubled = [x for item in ranked for x in (item, item)]
    assert recall_at_k(doubled, relevant, k) == recall_at_k(ranked, relevant, k)
    assert reciprocal_rank(doubled, relevant) == reciprocal_rank(ranked, relevant)
    assert ndcg_at_k(doubled, dict.fromkeys(relevant, 2), k) == ndcg_at_k(ranked, dict.fromkeys(relevant, 2), k)


@given(rankings, relevant_sets, ks)
def test_recall_is_one_when_everything_relevant_is_on_top(ranked: list[str], relevant: set[str], k: int) -> None:
    perfect = sorted(relevant) + [r for r in ranked if r not in relevant]
    assert recall_at_k(perfect, relevant, max(k, len(relevant))) == 1.0
    assert ndcg_at_k(perfect, dict.fromkeys(relevant, 3), k) == pytest.approx(1.0)
    assert reciprocal_rank(perfect, relevant) == 1.0


@given(rankings, relevant_sets)
def test_hit_agrees_with_first_correct_rank(ranked: list[str], relevant: set[str]) -> None:
    rank = first_correct_rank(ranked, relevant)
    for k in range(1, 22):
        assert hit_at_k(ranked, relevant, k) == (1.0 if rank is not None and rank <= k else 0.0)
