"""What a reviewer sees: sentences with citations linked to chunks, quote location, and escaping of every text
(a Hypothesis property over hostile strings rendered through the real item template)."""

from __future__ import annotations

from datetime import UTC, datetime
from html.parser import HTMLParser

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ragmon.review.auth import Session
from ragmon.review.item_view import build_item_view, locate, split_sentences
from ragmon.review.labels import Label, disagreements
from ragmon.review.queue import QueueItem, Verdict, Week
from ragmon.review.web import _environment
from tests.conftest import make_trace


def test_sentences_and_citation_links():
    trace = make_trace(answer="Yes. Consent can be withdrawn at any time.\nIt applies to future messages.",
                       citations=[{"sentence": 1, "chunk_id": "policy@c41", "quote": "withdrawn  AT any time"},
                                  {"sentence": 2, "chunk_id": "policy@c42", "quote": "not in the chunk"},
                                  {"sentence": 2, "chunk_id": "gone@c1", "quote": None},
                                  {"sentence": 9, "chunk_id": "policy@c41", "quote": None}])
    view = build_item_view(trace)
    assert [s.text for s in view.sentences] == ["Yes.", "Consent can be withdrawn at any time.",
                                                "It applies to future messages."]
    first = view.sentences[1].citations[0]
    assert (first.number, first.anchor, first.quote_found) == (1, "chunk-1", True)
    second, third = view.sentences[2].citations
    assert second.anchor == "chunk-2" and not second.quote_found
    assert third.anchor is None  # cited chunk not retrieved
    assert [c.number for c in view.orphan_citations] == [4]
    chunk = view.chunks[0]
    assert chunk.before + chunk.highlighted + chunk.after == chunk.text
    assert chunk.highlighted == "withdrawn at any time" and chunk.cited and chunk.in_context
    assert view.chunks[2].anchor == "chunk-3" and not view.chunks[2].in_context
    assert view.versions["model"] == "gen-model 2026-10"


def test_locate_ignores_case_and_spaces_and_handles_special_characters():
    assert locate("a  B", "xx A\nb yy") == (3, 6)
    assert locate("(.*)", "literal (.*) here") == (8, 12)
    assert locate("", "x") is None and locate("nope", "text") is None
    assert split_sentences("One! Two? (Three.) Four") == ["One!", "Two?", "(Three.)", "Four"]


def test_disagreement_ignores_unsure():
    at = datetime.now(UTC)
    a = Label("w", "t", "alice", at, True, None, True, None, "answer")
    b = Label("w", "t", "bob", at, None, False, False, None, "refuse")
    found = {d.field: d.values for d in disagreements([a, b])}
    assert set(found) == {"citations_supported", "expected_behaviour"}
    assert found["expected_behaviour"] == {"alice": "answer", "bob": "refuse"}
    assert disagreements([a]) == []


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, list[tuple[str, str | None]]]] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, attrs))


ALLOWED_TAGS = {"html", "head", "meta", "title", "link", "script", "body", "header", "a", "form", "span", "input",
                "button", "main", "nav", "kbd", "section", "h1", "h2", "p", "strong", "code", "dl", "dt", "dd",
                "ol", "li", "q", "div", "label", "pre", "mark", "fieldset", "legend", "select", "option",
                "textarea", "table", "thead", "tbody", "tr", "th", "td"}
hostile = st.lists(st.sampled_from(list("<>\"'&/= ;") + ["script", "img", "onerror", "src", "x", "{{", "}}",
                                                          "javascript:", "</textarea>", "\n", "é"]),
                   max_size=40).map("".join)


@pytest.mark.slow
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(question=hostile, answer=hostile, text=hostile, chunk_id=hostile.filter(bool), note=hostile, metric=hostile)
def test_no_text_from_a_trace_can_add_markup(question, answer, text, chunk_id, note, metric):
    trace = make_trace(question=question or "?", answer=answer, category=note,
                       citations=[{"sentence": 0, "chunk_id": chunk_id, "quote": text or None}])
    trace["retrieved"][0].update(chunk_id=chunk_id, text=text, doc_id=note or "d")
    trace["context"] = {"chunk_ids": [chunk_id], "tokens": 1}
    view = build_item_view(trace)
    at = datetime.now(UTC)
    label = Label("2026-W48", trace["trace_id"], note or "alice", at, True, True, None, None, "answer", note=note)
    week = Week("2026-W48", note, 1, 1, (QueueItem("2026-W48", trace["trace_id"], note, 0, (label,)),))
    html = _environment().get_template("item.html").render(
        session=Session("alice", "csrf", 0), week=week, item=view, trace=trace, mine=label, revealed=True,
        labels=[label], me="alice", disagreements=disagreements([label]),
        verdicts=[Verdict(metric, 0.5, "ok", note, note, note, None)], position=1, next_item=None)
    parser = _Tags()
    parser.feed(html)
    names = [t for t, _ in parser.tags]
    assert set(names) <= ALLOWED_TAGS, set(names) - ALLOWED_TAGS
    assert names.count("script") == 1
    assert not [a for _, attrs in parser.tags for a, _ in attrs if a.startswith("on")]
    assert not [v for _, attrs in parser.tags for a, v in attrs if a == "href" and v and "javascript:" in v]
