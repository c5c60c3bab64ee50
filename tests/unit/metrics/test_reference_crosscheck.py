"""Cross-check against trec_eval (pytrec-eval-terrier) on randomised rankings and graded judgments.

trec_eval orders a run by score, so each ranking is handed over with strictly decreasing scores; it cannot hold a
duplicate id, so the run it sees is our de-duplicated ranking (our convention: a duplicate counts once, at its
first position). Queries without a relevant chunk are None for us and are not compared.
"""

from __future__ import annotations

import random
from collections import defaultdict

import pytest
import pytrec_eval
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from ragmon.metrics import (
    context_precision,
    dedupe,
    hit_at_k,
    ndcg_at_k,
    precision_at_k,
    recall_at_k,
    reciprocal_rank,
)

N_QUERIES = 600


def _random_query(rng: random.Random) -> tuple[list[str], dict[str, int], int]:
    pool = [f"d{i:03d}" for i in range(rng.randint(3, 60))]
    judged = rng.sample(pool, rng.randint(1, min(12, len(pool))))
    grades = {d: rng.randint(0, 3) for d in judged}
    if all(g == 0 for g in grades.values()):
        grades[judged[0]] = rng.randint(1, 3)
    ranked = [rng.choice(pool) for _ in range(rng.randint(0, 40))]  # with repeats, sometimes fewer than k
    return ranked, grades, rng.randint(1, 30)


@pytest.fixture(scope="module")
def cases() -> list[tuple[list[str], dict[str, int], int]]:
    rng = random.Random(20260402)
    return [_random_query(rng) for _ in range(N_QUERIES)]


@pytest.fixture(scope="module")
def reference(cases: list[tuple[list[str], dict[str, int], int]]) -> dict[int, dict[str, float]]:
    by_k: dict[int, list[int]] = defaultdict(list)
    for i, (_, _, k) in enumerate(cases):
        by_k[k].append(i)
    out: dict[int, dict[str, float]] = {}
    for k, indices in by_k.items():
        qrels = {f"q{i}": cases[i][1] for i in indices}
        run = {}
        for i in indices:
            unique = dedupe(cases[i][0])
            run[f"q{i}"] = {doc: float(len(unique) - r) for r, doc in enumerate(unique)}
        measures = {f"ndcg_cut.{k}", f"recall.{k}", f"P.{k}", f"success.{k}", "recip_rank", "map", "num_rel",
                    "num_rel_ret"}
        result = pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(run)
        for i in indices:
            row = result.get(f"q{i}", {})
            out[i] = {name.replace(f"_{k}", ""): value for name, value in row.items()}
    return out


def test_reference_evaluated_every_query(reference: dict[int, dict[str, float]]) -> None:
    assert len(reference) == N_QUERIES


def test_ndcg_matches_trec_eval(cases, reference) -> None:  # type: ignore[no-untyped-def]
    compared = 0
    for i, (ranked, grades, k) in enumerate(cases):
        ours = ndcg_at_k(ranked, grades, k)
        assert ours == pytest.approx(reference[i].get("ndcg_cut", 0.0), abs=1e-9), (ranked, grades, k)
        compared += 1
    assert compared == N_QUERIES


def test_binary_metrics_match_trec_eval(cases, reference) -> None:  # type: ignore[no-untyped-def]
    for i, (ranked, grades, k) in enumerate(cases):
        relevant = {d for d, g in grades.items() if g >= 1}
        ref = reference[i]
        assert recall_at_k(ranked, relevant, k) == pytest.approx(ref.get("recall", 0.0), abs=1e-9)
        assert precision_at_k(ranked, relevant, k) == pytest.approx(ref.get("P", 0.0), abs=1e-9)
        assert hit_at_k(ranked, relevant, k) == pytest.approx(ref.get("success", 0.0), abs=1e-9)
        assert reciprocal_rank(ranked, relevant) == pytest.approx(ref.get("recip_rank", 0.0), abs=1e-9)


def test_context_precision_relates_to_trec_average_precision(cases, reference) -> None:  # type: ignore[no-untyped-def]
    # AP divides the same sum by all relevant items; context precision by the relevant items retrieved
    for i, (ranked, grades, _) in enumerate(cases):
        relevant = {d for d, g in grades.items() if g >= 1}
        ref = reference[i]
        assert ref["num_rel"] == len(relevant)
        expected = ref["map"] * ref["num_rel"] / ref["num_rel_ret"] if ref.get("num_rel_ret") else 0.0
        assert context_precision(ranked, relevant) == pytest.approx(expected, abs=1e-9)


_ids = st.sampled_from([f"d{i}" for i in range(15)])


@settings(max_examples=200, deadline=None)
@given(st.lists(_ids, max_size=25), st.dictionaries(_ids, st.integers(0, 3), min_size=1, max_size=10),
       st.integers(1, 30))  # fmt: skip
def test_hypothesis_against_trec_eval(ranked: list[str], grades: dict[str, int], k: int) -> None:
    relevant = {d for d, g in grades.items() if g >= 1}
    assume(relevant)
    unique = dedupe(ranked)
    run = {"q": {doc: float(len(unique) - r) for r, doc in enumerate(unique)}}
    measures = {f"ndcg_cut.{k}", f"recall.{k}", f"P.{k}", f"success.{k}", "recip_rank"}
    ref = pytrec_eval.RelevanceEvaluator({"q": grades}, measures).evaluate(run).get("q", {})
    assert ndcg_at_k(ranked, grades, k) == pytest.approx(ref.get(f"ndcg_cut_{k}", 0.0), abs=1e-9)
    assert recall_at_k(ranked, relevant, k) == pytest.approx(ref.get(f"recall_{k}", 0.0), abs=1e-9)
    assert precision_at_k(ranked, relevant, k) == pytest.approx(ref.get(f"P_{k}", 0.0), abs=1e-9)
    assert hit_at_k(ranked, relevant, k) == pytest.approx(ref.get(f"success_{k}", 0.0), abs=1e-9)
    assert reciprocal_rank(ranked, relevant) == pytest.approx(ref.get("recip_rank", 0.0), abs=1e-9)
