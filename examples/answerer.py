"""An example answerer for ``ragmon gate --answerer``: extractive, deterministic, no model.

    ragmon gate examples/golden/dev.json --retriever examples.retriever:search --k 3 \\
        --min-coverage 0.5 --min-mrr 0.5 --answerer examples.answerer:answer

``answer(question, chunks)`` gets the top-k retrieved ``(chunk_id, text)`` pairs, best first. It answers with
the sentence of the top chunk that shares the most words with the question, citing it with that sentence as
the quote. When that best sentence covers less than ``MIN_MATCH`` of the question's words it refuses: the
evidence is too weak to answer from. It stands in for a real generator so the gate can be shown end to end;
it never clarifies or routes, so golden cases expecting those count against it.
"""

from __future__ import annotations

import re

#: share of the question's content words the best sentence must contain to be given as the answer
MIN_MATCH = 0.34
REFUSAL = "I can't answer that from the documentation I have."
_WORD = re.compile(r"[a-z0-9]+")
_SENTENCE = re.compile(r"(?<=[.!?])\s+")
_STOP = frozenset(
    "a an and are as at be by can do does for from get how i if in is it me my of on or the to we what when "
    "where which who why will with you your".split()
)


def _terms(text: str) -> set[str]:
    out = set()
    for word in _WORD.findall(text.lower()):
        if word not in _STOP:
            out.add(word[:-1] if len(word) > 4 and word.endswith("s") and not word.endswith("ss") else word)
    return out


def answer(question: str, chunks: list[tuple[str, str]]) -> dict[str, object]:
    """One sentence of the top chunk, cited with itself as the quote; or a refusal."""
    refusal = {"answer": REFUSAL, "behaviour": "refuse", "citations": []}
    question_terms = _terms(question)
    if not chunks or not question_terms:
        return refusal
    chunk_id, text = chunks[0]
    sentences = [s.strip() for s in _SENTENCE.split(text) if s.strip()]
    # most shared words first; on a tie, the earlier sentence (deterministic)
    best = max(sentences, key=lambda s: len(question_terms & _terms(s)), default="")
    if len(question_terms & _terms(best)) / len(question_terms) < MIN_MATCH:
        return refusal
    return {"answer": best, "citations": [{"sentence": 0, "chunk_id": chunk_id, "quote": best}], "context": [chunk_id]}
