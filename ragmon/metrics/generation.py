"""Generation metrics: pure functions of judge verdicts (``ragmon.metrics.verdicts``) and of what the system did.

Judges produce verdicts; these functions only count. None means "nothing to score" (no claims, no citations, no
sentences), never 0. Refusal correctness is two numbers, never one: wrong refusals and missed refusals are
different product failures, and a refusal is joined to the retrieval that preceded it before anyone celebrates
it. No I/O, no clock, no judge logic.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

from ragmon.contracts.trace import Behaviour
from ragmon.metrics.quotes import verify_quote
from ragmon.metrics.verdicts import CitationVerdict, ClaimVerdict, Verdicts

__all__ = [
    "RefusalCause",
    "RefusalOutcome",
    "RefusalResult",
    "answer_relevance",
    "citation_precision",
    "citation_recall",
    "claim_sentences",
    "classify_refusal",
    "faithfulness",
    "refusal_causes",
    "refusal_correctness",
    "refusal_outcome",
    "verify_citation",
]


def _claim_supported(claim: ClaimVerdict) -> bool:
    if claim.supported is not True:
        return False
    # evidence the judge offered must survive the code check; a claim "supported" only by fabricated quotes is not
    return not claim.evidence or any(e.verified for e in claim.evidence)


def faithfulness(claims: Sequence[ClaimVerdict]) -> float | None:
    """Supported claims / claims; None when the answer has no claims.

    A claim counts as supported only when the judge said so (``supported is True``) and, if the judge gave
    evidence, at least one evidence quote was verified in code. Claims the judge could not decide (None) count
    as unsupported: an undecided claim is not evidence of grounding.

    Does NOT catch: truth — faithfulness is measured against the retrieved context, so a perfectly grounded
    answer from last year's policy scores 1.0; nor omission (a grounded answer that leaves out the exception).
    Read it next to context recall.
    """
    if not claims:
        return None
    return sum(1 for c in claims if _claim_supported(c)) / len(claims)


def verify_citation(
    sentence: int, chunk_id: str, quote: str | None, chunk_texts: Mapping[str, str | None], supports: bool | None
) -> CitationVerdict:
    """The verdict on one citation, with ``quote_verified`` decided here, in code.

    ``chunk_texts`` holds the text of the chunks the model was given; citing a chunk outside it, or with no
    text, cannot be verified. ``supports`` is the judge's opinion and is passed through untouched.

    Does NOT catch: a real quote that does not support its sentence (that is ``supports``), see
    :func:`ragmon.metrics.quotes.verify_quote` for the matching rules.
    """
    return CitationVerdict(
        sentence=sentence,
        chunk_id=chunk_id,
        quote_verified=verify_quote(quote, chunk_texts.get(chunk_id)),
        supports=supports,
    )


def citation_precision(citations: Sequence[CitationVerdict]) -> float | None:
    """Share of citations that hold (quote verified in code and the judge says it supports its sentence).

    None when the answer cites nothing.

    Does NOT catch: citation recall — an answer that cites one uncontroversial sentence perfectly and leaves
    four bare scores 1.0. Report :func:`citation_recall` beside it, or the metric can be gamed by citing less.
    """
    if not citations:
        return None
    return sum(1 for c in citations if c.holds) / len(citations)


def citation_recall(
    citations: Sequence[CitationVerdict], sentence_count: int, needs_citation: Collection[int] | None = None
) -> float | None:
    """Share of answer sentences that carry at least one citation that holds.

    ``needs_citation``: indices of the sentences that make a claim (default: all ``sentence_count`` sentences).
    Citations pointing outside that set are ignored. None when no sentence needs a citation.

    Does NOT catch: whether a sentence without a claim should have been counted (a greeting, a hedge), unless
    the caller passes ``needs_citation``; nor a sentence whose one citation supports half of it.
    """
    if isinstance(sentence_count, bool) or not isinstance(sentence_count, int) or sentence_count < 0:
        raise ValueError(f"sentence_count must be a non-negative integer, got {sentence_count!r}")
    needed = set(range(sentence_count)) if needs_citation is None else set(needs_citation)
    if not needed:
        return None
    covered = {c.sentence for c in citations if c.holds and c.sentence in needed}
    return len(covered) / len(needed)


_WORD = re.compile(r"\w+")


def claim_sentences(claims: Sequence[ClaimVerdict], sentences: Sequence[str], *, min_overlap: float = 0.6) -> set[int]:
    """Indices of the answer sentences that make a claim: the sentence each claim comes from.

    A judge's claims are atomic or reworded, so a claim rarely equals its sentence character for character. A
    claim belongs to the sentence holding the largest share of its words (case-folded), when that share is at
    least ``min_overlap``; a claim that fits no sentence well enough is left out.

    Does NOT catch: a claim that merges two sentences (it counts for the one holding more of its words).
    """
    bags = [set(_WORD.findall(s.casefold())) for s in sentences]
    found: set[int] = set()
    for claim in claims:
        words = set(_WORD.findall(claim.claim.casefold()))
        if not words or not bags:
            continue
        share, best = max((len(words & bag) / len(words), i) for i, bag in enumerate(bags))
        if share >= min_overlap:
            found.add(best)
    return found


def answer_relevance(verdicts: Verdicts) -> float | None:
    """The judge's answer-relevance score (0..1), checked; None when the judge gave none.

    A value outside [0, 1] or not finite raises ``ValueError``: a broken judge must not produce a number.

    Does NOT catch: anything about truth. A fluent, invented answer to exactly the right question scores well;
    read it only next to :func:`faithfulness`.
    """
    value = verdicts.answer_relevance
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or not 0 <= value <= 1:
        raise ValueError(f"answer_relevance must be a number in [0, 1], got {value!r}")
    return float(value)


class RefusalOutcome(StrEnum):
    """One case's refusal outcome: expected behaviour against what the system did."""

    correct_answer = "correct_answer"  # should answer, answered
    correct_decline = "correct_decline"  # should not answer, did the expected non-answer behaviour
    wrong_refusal = "wrong_refusal"  # should answer, declined (refused, clarified or routed)
    missed_refusal = "missed_refusal"  # should not answer, answered
    wrong_decline = "wrong_decline"  # should not answer, declined but not as expected (refused instead of routing)
    unknown = "unknown"  # nobody knows whether it should have answered


def refusal_outcome(expected: Behaviour | None, actual: Behaviour) -> RefusalOutcome:
    """Classify one case. ``expected`` comes from the golden set (a ``refuse`` answered by ``clarify`` is a wrong
    decline), or from the judge's ``RefusalVerdict``: ``answerable`` True → answer; False → any non-answer, so
    the live scorer passes the system's own non-answer behaviour as ``expected`` (``judge.scoring``).

    Does NOT catch: why the system declined — see :func:`classify_refusal` to join it to the retrieval.
    """
    actual = Behaviour(actual)
    if expected is None:
        return RefusalOutcome.unknown
    expected = Behaviour(expected)
    if expected == Behaviour.answer:
        return RefusalOutcome.correct_answer if actual == Behaviour.answer else RefusalOutcome.wrong_refusal
    if actual == Behaviour.answer:
        return RefusalOutcome.missed_refusal
    return RefusalOutcome.correct_decline if actual == expected else RefusalOutcome.wrong_decline


@dataclass(frozen=True, slots=True)
class RefusalResult:
    """Refusal correctness over a set of cases, as two rates that are never averaged together.

    ``wrong_refusal_rate`` = wrong refusals / cases that should be answered (None if there are none);
    ``missed_refusal_rate`` = missed refusals / cases that should not be answered (None if there are none).
    """

    should_answer: int
    should_decline: int
    wrong_refusals: int
    missed_refusals: int
    wrong_declines: int
    unknown: int
    wrong_refusal_rate: float | None
    missed_refusal_rate: float | None


def refusal_correctness(outcomes: Iterable[RefusalOutcome]) -> RefusalResult:
    """Count outcomes into the two refusal numbers (wrong refusals, missed refusals) and their rates.

    Does NOT catch: the cause of a refusal (a refusal forced by an empty shortlist looks the same as one made
    by judgement; see :func:`refusal_causes`), nor whether the words of a decline were helpful.
    """
    n = Counter(RefusalOutcome(o) for o in outcomes)
    answer = n[RefusalOutcome.correct_answer] + n[RefusalOutcome.wrong_refusal]
    decline = n[RefusalOutcome.correct_decline] + n[RefusalOutcome.missed_refusal] + n[RefusalOutcome.wrong_decline]
    return RefusalResult(
        should_answer=answer,
        should_decline=decline,
        wrong_refusals=n[RefusalOutcome.wrong_refusal],
        missed_refusals=n[RefusalOutcome.missed_refusal],
        wrong_declines=n[RefusalOutcome.wrong_decline],
        unknown=n[RefusalOutcome.unknown],
        wrong_refusal_rate=n[RefusalOutcome.wrong_refusal] / answer if answer else None,
        missed_refusal_rate=n[RefusalOutcome.missed_refusal] / decline if decline else None,
    )


class RefusalCause(StrEnum):
    """A refusal joined to the retrieval before it."""

    not_refused = "not_refused"
    empty_shortlist = "empty_shortlist"  # retrieval returned nothing: a retrieval bug with good manners
    low_score_shortlist = "low_score_shortlist"  # every score below the threshold: also retrieval
    irrelevant_shortlist = "irrelevant_shortlist"  # results came back, none relevant by the golden judgments
    with_evidence = "with_evidence"  # good evidence was there and the model still declined: a generation decision


def classify_refusal(
    actual: Behaviour, scores: Sequence[float], *, min_score: float, evidence_found: bool | None = None
) -> RefusalCause:
    """Why a declining trace declined, as far as its retrieval can tell.

    ``scores``: retrieval scores of the shortlist. ``min_score``: the score under which a shortlist counts as
    weak (retriever-specific, so required). ``evidence_found``: when known (golden set: a relevant chunk was
    retrieved), it decides instead of the scores.

    Does NOT catch: a shortlist with high scores and wrong content (scores measure similarity, not relevance),
    unless ``evidence_found`` is supplied; nor thresholds that mean different things across retrievers.
    """
    if not math.isfinite(min_score):
        raise ValueError(f"min_score must be finite, got {min_score!r}")
    if Behaviour(actual) == Behaviour.answer:
        return RefusalCause.not_refused
    if evidence_found is not None:
        if evidence_found:
            return RefusalCause.with_evidence
        return RefusalCause.empty_shortlist if not scores else RefusalCause.irrelevant_shortlist
    if not scores:
        return RefusalCause.empty_shortlist
    return RefusalCause.with_evidence if max(scores) >= min_score else RefusalCause.low_score_shortlist


def refusal_causes(causes: Iterable[RefusalCause]) -> dict[RefusalCause, int]:
    """Count of each cause (every cause present, zero when absent), for the per-stratum report.

    Does NOT catch: refusals that were correct; combine with :func:`refusal_outcome` to see which of the
    retrieval-caused refusals were also wrong ones.
    """
    counts = Counter(RefusalCause(c) for c in causes)
    return {cause: counts[cause] for cause in RefusalCause}
