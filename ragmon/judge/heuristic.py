"""``HeuristicJudge``: a deterministic judge with no model — the embedded default.

It splits the answer into sentence-level claims and calls a claim supported when enough of its content words
(stemmed, stopwords dropped, negation kept) occur in one context chunk; it reads citations, answer relevance,
chunk relevance and answerability the same lexical way, and spots refusals written as answers by their
phrasing. It is a heuristic and is documented as one (docs/judges.md): it cannot see paraphrase, numbers in
words, or a claim that reuses the chunk's words to say something else. It never follows instructions found in
chunk text because it follows no instructions at all. Thread-safe (no mutable state).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ragmon.judge.base import JudgeInput, Judgement, citation_verdict, fingerprint, verify_evidence
from ragmon.judge.text import content_terms, coverage, sentences
from ragmon.metrics.verdicts import ChunkRelevance, ClaimVerdict, RefusalVerdict, Verdicts

#: bump when the algorithm changes: it is part of the fingerprint, so old and new scores never mix
ALGORITHM_VERSION = "heuristic-1"

_REFUSAL = re.compile(
    r"\b(?:i (?:can ?not|can't|am unable to|am not able to|don't|do not) (?:answer|help|find|know|say|provide)"
    r"|i(?:'m| am) (?:sorry|afraid)\b.*\b(?:can ?not|can't|unable|don't)"
    r"|(?:no|not enough|insufficient) (?:information|relevant (?:information|documents?)|context)"
    r"|(?:is|are) not (?:covered|mentioned|available) in (?:the|my) (?:documents?|context|sources?)"
    r"|unable to (?:answer|find|help)|cannot (?:answer|help with) (?:that|this))",
    re.IGNORECASE,
)


@dataclass(frozen=True, slots=True)
class HeuristicParams:
    """Thresholds of the heuristic; every one is part of the fingerprint."""

    #: share of a claim's content words that one chunk must contain for the claim to count as supported
    support_threshold: float = 0.7
    #: share of the question's content words a chunk must contain to count as relevant to it
    relevance_threshold: float = 0.34
    #: share of the question's content words the best chunk must contain for the question to be answerable
    answerable_threshold: float = 0.5
    #: sentences with fewer content words are not claims ("Yes.", "Sure, here you go.")
    min_claim_terms: int = 2


class HeuristicJudge:
    """Lexical judge: same input, same verdicts, on any machine. See the module docstring for its limits."""

    name = "heuristic"
    model = ""

    def __init__(self, params: HeuristicParams | None = None):
        self.params = params or HeuristicParams()
        p = self.params
        self.fingerprint = fingerprint(
            judge=self.name, model="", model_version="", prompt_template="", temperature=0.0,
            parser_version=ALGORITHM_VERSION, support_threshold=p.support_threshold,
            relevance_threshold=p.relevance_threshold, answerable_threshold=p.answerable_threshold,
            min_claim_terms=p.min_claim_terms,
        )

    def judge(self, trace: Any) -> Verdicts:
        return self.assess(JudgeInput.of(trace)).verdicts

    def assess(self, item: JudgeInput) -> Judgement:
        p = self.params
        readable = [(c.chunk_id, c.text) for c in item.chunks if c.text]
        chunk_sentences = {cid: [(s, set(content_terms(s))) for s in sentences(text)] for cid, text in readable}
        chunk_terms = {cid: set().union(*(t for _, t in chunk_sentences[cid])) for cid, _ in readable}
        question_terms = content_terms(item.question)

        refusal_text = [bool(_REFUSAL.search(s)) for s in item.sentences]
        observed = "refuse" if item.behaviour == "answer" and item.sentences and all(refusal_text) else None
        claims = []
        for sentence, is_refusal in zip(item.sentences, refusal_text, strict=True):
            terms = content_terms(sentence)
            if is_refusal or len(set(terms)) < p.min_claim_terms:
                continue
            claims.append(self._claim(item, sentence, terms, chunk_terms, chunk_sentences))

        citations = []
        for ref in item.citations:
            supports: bool | None = False
            quote = None
            if ref.chunk_id in chunk_terms and 0 <= ref.sentence < len(item.sentences):
                terms = content_terms(item.sentences[ref.sentence])
                supports = _supported(terms, chunk_terms[ref.chunk_id], chunk_sentences[ref.chunk_id],
                                      p.support_threshold)
                quote = _best_sentence(terms, chunk_sentences[ref.chunk_id])
            elif ref.chunk_id not in chunk_terms and item.chunk_text(ref.chunk_id) is None and any(
                c.chunk_id == ref.chunk_id for c in item.chunks
            ):
                supports = None  # the chunk was in the context but its text was not sent: cannot tell
            citations.append(citation_verdict(item, ref, supports, judge_quote=quote))

        relevance = None
        if item.behaviour == "answer" and observed is None and question_terms:
            relevance = round(coverage(question_terms, set(content_terms(item.answer))), 6)
        chunk_cov = {cid: coverage(question_terms, terms) for cid, terms in chunk_terms.items()}
        answerable = None
        if question_terms and chunk_cov:
            answerable = max(chunk_cov.values()) >= p.answerable_threshold
        elif question_terms and not item.chunks:
            answerable = False  # nothing was retrieved: the context cannot answer anything
        verdicts = Verdicts(
            judge_fingerprint=self.fingerprint,
            claims=tuple(claims),
            citations=tuple(citations),
            answer_relevance=relevance,
            refusal=RefusalVerdict(answerable),
            chunks=tuple(ChunkRelevance(cid, chunk_cov[cid] >= p.relevance_threshold) for cid, _ in readable),
            sentences=item.sentences,
            observed_behaviour=observed,
        )
        return Judgement(verdicts)

    def _claim(self, item: JudgeInput, sentence: str, terms: list[str], chunk_terms: dict[str, set[str]],
               chunk_sentences: dict[str, list[tuple[str, set[str]]]]) -> ClaimVerdict:
        if not chunk_terms:
            return ClaimVerdict(sentence, None)  # no chunk text to check against
        best_id = max(chunk_terms, key=lambda cid: coverage(terms, chunk_terms[cid]))
        if not _supported(terms, chunk_terms[best_id], chunk_sentences[best_id], self.params.support_threshold):
            return ClaimVerdict(sentence, False)
        quote = _best_sentence(terms, chunk_sentences[best_id])
        evidence = (verify_evidence(item, best_id, quote),) if quote else ()
        return ClaimVerdict(sentence, True, evidence)


def _supported(terms: list[str], chunk: set[str], chunk_sentences: list[tuple[str, set[str]]],
               threshold: float) -> bool:
    """Enough of the claim's words are in the chunk, and the closest chunk sentence agrees on negation
    ("can be withdrawn" is not supported by "cannot be withdrawn", nor the reverse)."""
    if coverage([t for t in terms if t != "not"], chunk) < threshold:
        return False
    best = _best_sentence(terms, chunk_sentences)
    if best is None:
        return False
    return ("not" in terms) == ("not" in set(content_terms(best)))


def _best_sentence(terms: list[str], chunk_sentences: list[tuple[str, set[str]]]) -> str | None:
    if not chunk_sentences:
        return None
    plain = [t for t in terms if t != "not"]
    text, sentence_terms = max(chunk_sentences, key=lambda s: coverage(plain, s[1]))
    return text if coverage(plain, sentence_terms) > 0 else None
