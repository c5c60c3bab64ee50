"""Ranking agreement: known answers by hand, and Hypothesis properties (bounds, identity, symmetry)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ragmon.shadow.agreement import (
    dedupe,
    jaccard_at_k,
    kendall_tau_shared,
    rank_biased_overlap,
    top1_agreement,
)

ids = st.lists(st.sampled_from([f"c{i}" for i in range(15)]), max_size=12)
ks = st.integers(min_value=1, max_value=12)
ps = st.floats(min_value=0.05, max_value=0.95)


def test_known_values():
    a, b = ["a", "b", "c"], ["c", "b", "x"]
    assert jaccard_at_k(a, b, 3) == pytest.approx(2 / 4)
    # (1-p)/(1-p^3) * (0 + 0.9*1/2 + 0.81*2/3)
    assert rank_biased_overlap(a, b, 3, 0.9) == pytest.approx(0.1 / (1 - 0.729) * (0.45 + 0.54))
    assert kendall_tau_shared(a, b, 3) == -1.0  # b before c vs c before b
    assert kendall_tau_shared(["a", "b", "c", "d"], ["a", "c", "b", "d"], 4) == pytest.approx((5 - 1) / 6)
    assert top1_agreement(a, b) is False
    assert top1_agreement(["x"], ["x", "y"]) is True


def test_empty_and_k_conventions():
    assert jaccard_at_k([], [], 5) == 1.0
    assert rank_biased_overlap([], [], 5) == 1.0
    assert jaccard_at_k([], ["a"], 5) == 0.0
    assert rank_biased_overlap(["a"], [], 5) == 0.0
    assert top1_agreement([], []) is None
    assert top1_agreement([], ["a"]) is False
    assert kendall_tau_shared(["a"], ["a"], 5) is None
    # only the top k count: the lists differ below rank 2
    assert jaccard_at_k(["a", "b", "c"], ["a", "b", "z"], 2) == 1.0
    with pytest.raises(ValueError, match="positive integer"):
        jaccard_at_k(["a"], ["a"], 0)
    with pytest.raises(ValueError, match=r"\(0, 1\)"):
        rank_biased_overlap(["a"], ["a"], 3, p=1.0)


def test_duplicates_count_once_at_first_position():
    assert dedupe(["a", "b", "a", "c"]) == ["a", "b", "c"]
    assert jaccard_at_k(["a", "a", "b"], ["a", "b"], 2) == 1.0
    assert rank_biased_overlap(["a", "a", "b"], ["a", "b"], 2) == pytest.approx(1.0)


@given(ids, ids, ks, ps)
def test_bounds_and_symmetry(a, b, k, p):
    j, r = jaccard_at_k(a, b, k), rank_biased_overlap(a, b, k, p)
    assert 0.0 <= j <= 1.0
    assert 0.0 <= r <= 1.0 + 1e-12
    assert j == jaccard_at_k(b, a, k)
    assert r == pytest.approx(rank_biased_overlap(b, a, k, p))
    tau = kendall_tau_shared(a, b, k)
    assert tau is None or -1.0 <= tau <= 1.0
    assert tau == kendall_tau_shared(b, a, k) or tau == pytest.approx(kendall_tau_shared(b, a, k))


@given(ids, ks, ps)
def test_identity(a, k, p):
    assert jaccard_at_k(a, a, k) == 1.0
    assert rank_biased_overlap(a, a, k, p) == pytest.approx(1.0)
    tau = kendall_tau_shared(a, a, k)
    assert tau is None or tau == 1.0
    if a:
        assert top1_agreement(a, a) is True


@given(st.lists(st.sampled_from([f"c{i}" for i in range(15)]), min_size=2, max_size=12, unique=True))
def test_reversal_is_minus_one_and_disjoint_is_zero(a):
    assert kendall_tau_shared(a, list(reversed(a)), len(a)) == -1.0
    other = [x + "'" for x in a]
    assert jaccard_at_k(a, other, len(a)) == 0.0
    assert rank_biased_overlap(a, other, len(a)) == 0.0
