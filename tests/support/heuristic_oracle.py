"""The oracle for the heuristic judge: a verbatim copy of ``HeuristicJudge`` and its text functions as they were
before the chunk cache and the per-sentence speed-ups (ragmon 0.1.0, ``heuristic-1``).

The property test in ``tests/unit/judge/test_heuristic_oracle.py`` checks that the shipped judge returns exactly
the verdicts this copy returns on random traces, and ``bench/score.py --oracle`` times both side by side. Do not
"fix" or speed up anything here: its only value is that it is the old code. It shares with the shipped judge
only what the change did not touch (``JudgeInput``, ``citation_verdict``, ``verify_evidence``, the metrics).
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from ragmon.judge.base import JudgeInput, Judgement, citation_verdict, fingerprint, verify_evidence
from ragmon.metrics.verdicts import ChunkRelevance, ClaimVerdict, RefusalVerdict, Verdicts

#: the algorithm version of the copied judge (its fingerprint must equal the shipped judge's)
ALGORITHM_VERSION = "heuristic-1"

_FOLD = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"', "\u2013": "-", "\u2014": "-",
                       "\u00a0": " "})
_SPACE = re.compile(r"\s+")
# a sentence ends at . ! ? (optionally followed by a closing quote/bracket) and whitespace, or at a newline
_SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]]*\s+|\n+")
_WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)*", re.UNICODE)
# numbers written like 1,000 or 3.5 stay one token
_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")

STOPWORDS = frozenset(
    """a about above after again against all am an and any are as at be because been before being below between
    both but by can could did do does doing down during each few for from further had has have having he her here
    hers herself him himself his how i if in into is it its itself just me more most my myself no nor not of off
    on once only or other our ours ourselves out over own same she should so some such than that the their theirs
    them themselves then there these they this those through to too under until up very was we were what when
    where which while who whom why will with would you your yours yourself yourselves also may might must shall
    yes ok okay please us get got""".split()
)
#: negations are content: "can be withdrawn" and "cannot be withdrawn" must not look alike
NEGATIONS = frozenset({"no", "not", "never", "cannot", "can't", "won't", "don't", "doesn't", "isn't", "aren't",
                       "wasn't", "weren't", "nor", "without", "none"})


def normalize(text: str) -> str:
    """Fold Unicode form, typographic punctuation, case and runs of whitespace."""
    return _SPACE.sub(" ", unicodedata.normalize("NFKC", text).translate(_FOLD)).strip().casefold()


def sentences(text: str) -> list[str]:
    """Split text into sentences (a regex splitter: abbreviations like "e.g." can split a sentence in two)."""
    return [s.strip() for s in _SENTENCE_END.split(text.strip()) if s and s.strip()]


def stem(word: str) -> str:
    """A deliberately light suffix stripper so 'withdrawn'/'withdrawal'/'withdraw' meet; not a real stemmer."""
    for suffix in ("ational", "ations", "ation", "ments", "ment", "ings", "ing", "ness", "ies", "ied", "als",
                   "al", "edly", "ed", "es", "ly", "s", "n"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 4:
            word = word[: -len(suffix)]
            break
    if word.endswith("e") and len(word) > 4:
        word = word[:-1]
    return word


def content_terms(text: str) -> list[str]:
    """Stemmed content words (stopwords dropped, negations kept as the token 'not'), in order."""
    return [t for t in map(_term, _WORD.findall(normalize(text))) if t]


@lru_cache(maxsize=200_000)
def _term(word: str) -> str:
    """One word's term ('' for a stopword); cached, since vocabularies are small and texts repeat words."""
    word = word.replace("’", "'")
    if word in NEGATIONS or word.endswith("n't"):
        return "not"
    if word in STOPWORDS or (len(word) == 1 and not word.isdigit()):
        return ""
    return word if _NUMBER.fullmatch(word) else stem(word)


def coverage(terms: list[str] | set[str], against: set[str]) -> float:
    """Share of distinct ``terms`` found in ``against`` (0 when there are no terms)."""
    distinct = set(terms)
    return len(distinct & against) / len(distinct) if distinct else 0.0


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


class OracleHeuristicJudge:
    """Today's HeuristicJudge, verbatim: the oracle the faster one must agree with."""

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
