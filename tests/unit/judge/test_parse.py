"""The LLM output parser: hostile or broken model output yields MalformedOutput or verified verdicts, nothing else."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragmon.judge import JudgeInput
from ragmon.judge.parse import MalformedOutput, parse_verdicts
from ragmon.judge.prompt import OUTPUT_SCHEMA, render_messages
from tests.conftest import make_trace

ITEM = JudgeInput.of(make_trace())

json_values = st.recursive(
    st.none() | st.booleans() | st.floats(allow_nan=False) | st.integers() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(max_size=200), json_values.map(json.dumps)))
def test_arbitrary_output_is_malformed_or_verdicts(content: str):
    try:
        v = parse_verdicts(content, ITEM, "fp")
    except MalformedOutput:
        return
    assert v.judge_fingerprint == "fp"


@settings(max_examples=100, deadline=None)
@given(st.lists(st.fixed_dictionaries({
    "claim": st.text(max_size=30), "supported": st.sampled_from(["yes", "no", "unsure"]),
    "evidence": st.lists(st.fixed_dictionaries({"chunk_id": st.sampled_from(["policy@c41", "faq@c7", "x"]),
                                                "quote": st.text(max_size=40)}), max_size=3)}), max_size=5))
def test_supported_claims_always_have_a_verified_quote(claims):
    out = {"claims": claims, "citations": [], "answer_relevance": 0.5, "answerable": "yes", "chunks": [],
           "answer_is_refusal": False}
    v = parse_verdicts(json.dumps(out), ITEM, "fp")
    for c in v.claims:
        if c.supported is True:
            assert any(e.verified for e in c.evidence)


def test_quote_from_a_chunk_outside_the_context_is_not_verified():
    out = {"claims": [{"claim": "Offices open on weekdays.", "supported": "yes",
                       "evidence": [{"chunk_id": "faq@c7", "quote": "Our offices are open on weekdays"}]}],
           "citations": [], "answer_relevance": 0.5, "answerable": "yes", "chunks": [], "answer_is_refusal": False}
    v = parse_verdicts(json.dumps(out), ITEM, "fp")
    assert v.claims[0].supported is False  # faq@c7 was retrieved but not passed to the model


@pytest.mark.parametrize("content", ["", "   ", "null", "[]", '{"claims": []}'])
def test_empty_or_partial_output_is_malformed(content: str):
    with pytest.raises(MalformedOutput):
        parse_verdicts(content, ITEM, "fp")


def test_schema_is_strict_mode_compatible():
    def walk(node):
        if node.get("type") == "object":
            assert node["additionalProperties"] is False
            assert set(node["required"]) == set(node["properties"])
            for child in node["properties"].values():
                walk(child)
        elif node.get("type") == "array":
            walk(node["items"])

    walk(OUTPUT_SCHEMA)


def test_long_chunks_are_cut_and_marked():
    item = JudgeInput.of(make_trace(retrieved=[{"chunk_id": "big", "score": 1.0, "rank": 1, "text": "word " * 5000}],
                                    context={"chunk_ids": ["big"]}))
    user = render_messages(item, max_chunk_chars=500)[1]["content"]
    assert "cut by ragmon" in user and len(user) < 3000
