"""The faster heuristic judge returns exactly the verdicts of the old one (the oracle, a verbatim copy in
tests/support/heuristic_oracle.py), on random traces, from a cold and from a warm chunk cache."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ragmon.judge import HeuristicJudge, JudgeInput
from ragmon.judge.base import Chunk, CitationRef
from ragmon.judge.chunk_profile import ChunkProfiles
from ragmon.judge.heuristic import HeuristicParams
from ragmon.judge.text import content_term_set, content_terms
from tests.support import heuristic_oracle as oracle

# words that exercise the stemmer, stopwords, negations, numbers and apostrophes, plus non-ASCII spellings
WORDS = ("consent withdrawn withdrawal withdraw can cannot can't not never no refund refunds refunded days 30 "
         "1,000 3.5 messages marketing future applies the a of is are policy policies Straße STRASSE café "
         "ﬁnal don’t won't it's customer's e.g. I sorry unable answer information documents context").split()
SEPARATORS = (" ", " ", " ", ", ", ". ", "! ", "? ", '." ', ".) ", "\n", "\n\n", "\t", "\u00a0", " — ", " ‘", "’ ")

text = st.lists(st.tuples(st.sampled_from(WORDS), st.sampled_from(SEPARATORS)), max_size=40).map(
    lambda parts: "".join(w + s for w, s in parts))


@st.composite
def inputs(draw: st.DrawFn) -> JudgeInput:
    pool = draw(st.lists(text, min_size=1, max_size=4))  # few texts, so chunks (and the cache) repeat
    n = draw(st.integers(0, 6))
    chunks = tuple(Chunk(f"c{draw(st.integers(0, 7))}", draw(st.one_of(st.none(), st.just(""), st.sampled_from(pool))))
                   for _ in range(n))
    answer = draw(st.one_of(text, st.sampled_from(pool), st.just("I'm sorry, I cannot answer that.")))
    citations = tuple(CitationRef(draw(st.integers(-1, 5)), f"c{draw(st.integers(0, 8))}",
                                  draw(st.one_of(st.none(), text, st.sampled_from(pool))))
                      for _ in range(draw(st.integers(0, 3))))
    return JudgeInput(trace_id="t", query_id="q", question=draw(text), answer=answer,
                      behaviour=draw(st.sampled_from(["answer", "answer", "refuse", "clarify"])), chunks=chunks,
                      citations=citations)


@pytest.mark.slow
@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(item=inputs(), params=st.sampled_from([HeuristicParams(), HeuristicParams(0.5, 0.2, 0.3, 1)]))
def test_verdicts_are_identical_to_the_old_implementation(item: JudgeInput, params: HeuristicParams) -> None:
    expected = oracle.OracleHeuristicJudge(params).assess(item).verdicts
    judge = HeuristicJudge(params, chunk_cache_entries=8)
    assert judge.assess(item).verdicts == expected  # cold cache
    assert judge.assess(item).verdicts == expected  # every chunk from the cache now
    assert HeuristicJudge(params, chunk_cache_entries=0).assess(item).verdicts == expected
    assert judge.fingerprint == oracle.OracleHeuristicJudge(params).fingerprint
    assert list(item.sentences) == oracle.sentences(item.answer)


@pytest.mark.slow
@settings(max_examples=2000, deadline=None)
@given(st.text(alphabet=st.sampled_from("aZ9'’ .!?\n\t\u00a0\u2019\u00e9\u0301\ufb01ß_-,İ"), max_size=30) | text)
def test_content_terms_take_the_ascii_shortcut_without_changing_a_term(value: str) -> None:
    assert content_terms(value) == oracle.content_terms(value)
    assert content_term_set(value) == frozenset(oracle.content_terms(value))


def test_the_chunk_cache_is_bounded_and_reused() -> None:
    profiles = ChunkProfiles(max_entries=2)
    first = profiles.get("Consent can be withdrawn. It applies to future messages.")
    assert profiles.get("Consent can be withdrawn. It applies to future messages.") is first
    profiles.get("b b b.")
    profiles.get("c c c.")  # evicts the least recently used
    hits, misses, entries = profiles.stats()
    assert (hits, misses, entries) == (1, 3, 2)
    assert profiles.get("Consent can be withdrawn. It applies to future messages.") is not first


def test_a_judge_reads_a_popular_chunk_once() -> None:
    judge = HeuristicJudge()
    chunk = Chunk("c1", "Consent can be withdrawn at any time. Withdrawal applies to future messages.")
    for i in range(5):
        judge.assess(JudgeInput(trace_id=f"t{i}", query_id=f"q{i}", question="Can consent be withdrawn?",
                                answer="Consent can be withdrawn at any time.", behaviour="answer", chunks=(chunk,)))
    hits, misses, _ = judge.profiles.stats()
    assert (hits, misses) == (4, 1)
