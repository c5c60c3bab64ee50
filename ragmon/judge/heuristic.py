"""``HeuristicJudge``: a deterministic judge with no model — the embedded default.

It splits the answer into sentence-level claims and calls a claim supported when enough of its content words
(stemmed, stopwords dropped, negation kept) occur in one context chunk; it reads citations, answer relevance,
chunk relevance and answerability the same lexical way, and spots refusals written as answers by their
phrasing. It is a heuristic and is documented as one (docs/judges.md): it cannot see paraphrase, numbers in
words, or a claim that reuses the chunk's words to say something else. It never follows instructions found in
chunk text because it follows no instructions at all. Thread-safe (its only state is a cache of pure results).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ragmon.judge.base import JudgeInput, Judgement, citation_verdict, fingerprint
from ragmon.judge.chunk_profile import DEFAULT_MAX_ENTRIES, ChunkProfile, ChunkProfiles
from ragmon.judge.text import content_terms, coverage, evidence_holds
from ragmon.metrics.verdicts import ChunkRelevance, ClaimVerdict, Evidence, RefusalVerdict, Verdicts

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
    """Lexical judge: same input, same verdicts, on any machine. See the module docstring for its limits.

    Each chunk text's sentences and content words are kept in a bounded cache (``ChunkProfiles``), so the popular
    chunks that come back in many traces are read once; ``chunk_cache_entries`` 0 turns it off.
    """

    name = "heuristic"
    model = ""
    #: CPU-bound: judging it from several threads would only contend for the interpreter (see ``JudgePool``)
    io_bound = False

    def __init__(self, params: HeuristicParams | None = None, *, chunk_cache_entries: int = DEFAULT_MAX_ENTRIES):
        self.params = params or HeuristicParams()
        self.profiles = ChunkProfiles(chunk_cache_entries)
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
        profiles = {cid: self.profiles.get(text) for cid, text in readable}
        question = frozenset(content_terms(item.question))
        answer_terms = [content_terms(s) for s in item.sentences]

        refusal_text = [bool(_REFUSAL.search(s)) for s in item.sentences]
        observed = "refuse" if item.behaviour == "answer" and item.sentences and all(refusal_text) else None
        claims = []
        for sentence, terms, is_refusal in zip(item.sentences, answer_terms, refusal_text, strict=True):
            if is_refusal or len(set(terms)) < p.min_claim_terms:
                continue
            claims.append(self._claim(item, sentence, terms, profiles))

        citations = []
        for ref in item.citations:
            supports: bool | None = False
            quote = None
            if ref.chunk_id in profiles and 0 <= ref.sentence < len(item.sentences):
                profile = profiles[ref.chunk_id]
                supports, best = _support(answer_terms[ref.sentence], profile, p.support_threshold)
                quote = None if best is None else profile.sentences[best][0]
            elif ref.chunk_id not in profiles and item.chunk_text(ref.chunk_id) is None and any(
                c.chunk_id == ref.chunk_id for c in item.chunks
            ):
                supports = None  # the chunk was in the context but its text was not sent: cannot tell
            citations.append(citation_verdict(item, ref, supports, judge_quote=quote))

        relevance = None
        if item.behaviour == "answer" and observed is None and question:
            relevance = round(coverage(question, set(content_terms(item.answer))), 6)
        chunk_cov = {cid: _share(question, profile.terms) for cid, profile in profiles.items()}
        answerable = None
        if question and chunk_cov:
            answerable = max(chunk_cov.values()) >= p.answerable_threshold
        elif question and not item.chunks:
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

    def _claim(self, item: JudgeInput, sentence: str, terms: list[str],
               profiles: dict[str, ChunkProfile]) -> ClaimVerdict:
        if not profiles:
            return ClaimVerdict(sentence, None)  # no chunk text to check against
        distinct = frozenset(terms)
        best_id = max(profiles, key=lambda cid: _share(distinct, profiles[cid].terms))
        profile = profiles[best_id]
        supported, best = _support(terms, profile, self.params.support_threshold)
        if not supported:
            return ClaimVerdict(sentence, False)
        if best is None:  # unreachable (support needs a best sentence), kept for the old code's shape
            return ClaimVerdict(sentence, True)
        quote = profile.sentences[best][0]
        text = item.chunk_text(best_id)
        verified = profile.evidence_holds(best) if text == profile.text else evidence_holds(quote, text)
        return ClaimVerdict(sentence, True, (Evidence(best_id, quote, verified),))


def _share(distinct: frozenset[str], against: frozenset[str]) -> float:
    """``coverage`` for terms already made distinct (the same float: shared / distinct, 0 when empty)."""
    return len(distinct & against) / len(distinct) if distinct else 0.0


def _support(terms: list[str], profile: ChunkProfile, threshold: float) -> tuple[bool, int | None]:
    """(supported, closest sentence): enough of the claim's words are in the chunk, and the closest chunk
    sentence agrees on negation ("can be withdrawn" is not supported by "cannot be withdrawn", nor the reverse).
    The closest sentence is also the evidence quote, whatever the verdict."""
    plain = frozenset(t for t in terms if t != "not")
    best = profile.best_sentence(plain)
    if _share(plain, profile.terms) < threshold or best is None:
        return False, best
    return ("not" in terms) == ("not" in profile.sentences[best][1]), best
