"""The traffic generator: deterministic, valid trace.v1 and golden-case.v1 documents, knobs that work."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime

import msgspec

from ragmon.contracts.decode import DecodedTrace, decode_trace
from ragmon.contracts.golden import GoldenSet
from ragmon.demo.traffic import HOSTILE_TEXT, RetrieverProfile, generate_golden, generate_traces, relevance_of

START = datetime(2026, 11, 30, tzinfo=UTC)


def test_deterministic_and_valid():
    cand = RetrieverProfile(name="dense", version="v2")
    a = generate_traces(40, seed=5, start=START, candidate=cand)
    b = generate_traces(40, seed=5, start=START, candidate=cand)
    assert a == b
    assert a != generate_traces(40, seed=6, start=START, candidate=cand)
    for doc in a:
        assert isinstance(decode_trace(msgspec.json.encode(doc)), DecodedTrace)
    variants = Counter(d["retriever"]["variant"] for d in a)
    assert variants == {"production": 40, "shadow": 40}
    assert len({d["trace_id"] for d in a}) == 80
    assert len({d["query_id"] for d in a}) == 40  # shadow twins share the query_id


def test_coverage_candidate_only_errors_and_k():
    cand = RetrieverProfile(name="dense", k=5, error_rate=1.0)
    docs = generate_traces(100, seed=1, start=START, candidate=cand, coverage=0.5, candidate_only=7)
    shadow = [d for d in docs if d["retriever"]["variant"] == "shadow"]
    prod_q = {d["query_id"] for d in docs if d["retriever"]["variant"] == "production"}
    assert 30 < sum(d["query_id"] in prod_q for d in shadow) < 70
    assert sum(d["query_id"] not in prod_q for d in shadow) == 7
    assert all(d["error"] and d["retrieved"] == [] for d in shadow)
    assert all(d["retriever"]["parameters"]["k"] == 5 for d in shadow)


def test_stratum_noise_changes_quality_and_golden_matches():
    worse = RetrieverProfile(name="dense", stratum_noise={"billing": 3.0})
    docs = generate_traces(400, seed=2, start=START, candidate=worse)
    rel = relevance_of(400, seed=2)

    def hit(variant: str, stratum: str) -> float:
        rows = [d for d in docs if d["retriever"]["variant"] == variant and d["category"] == stratum]
        return sum(any(r["chunk_id"] in rel[d["query_id"]] for r in d["retrieved"][:3]) for d in rows) / len(rows)

    assert hit("shadow", "billing") < hit("production", "billing") - 0.2
    assert abs(hit("shadow", "consent") - hit("production", "consent")) < 0.15
    cases = GoldenSet.validate_python(generate_golden(400, seed=2, every=10))
    by_question = {d["question"]: d for d in docs if d["retriever"]["variant"] == "production"}
    for case in cases:
        assert case.relevant_chunks() == set(rel[by_question[case.question]["query_id"]])


def test_hostile_text_is_there_for_escaping_tests():
    docs = generate_traces(200, seed=3, start=START, hostile_every=10)
    assert sum("<img" in d["question"] for d in docs) == 20
    assert any(r["text"] == HOSTILE_TEXT for d in docs for r in d["retrieved"])
