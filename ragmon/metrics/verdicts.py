"""Judge verdict types: what a judge (heuristic or LLM) says about one trace.

The generation metrics are pure functions of these; judges produce them. Every verdict set carries the judge
fingerprint, so scores from different judges are never mixed. Types only: no I/O, no judge logic.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Evidence:
    """A span a judge relied on. ``verified`` is set in code: the quote occurs in the chunk's text."""

    chunk_id: str
    quote: str
    verified: bool


@dataclass(frozen=True, slots=True)
class ClaimVerdict:
    """One atomic claim of the answer and whether the context supports it (None: the judge could not tell)."""

    claim: str
    supported: bool | None
    evidence: tuple[Evidence, ...] = ()


@dataclass(frozen=True, slots=True)
class CitationVerdict:
    """One citation of the answer.

    ``quote_verified``: the quoted text occurs in the cited chunk (checked in code, never taken from a judge).
    ``supports``: the cited chunk supports the sentence that cites it (a judge's opinion; None if unknown).
    A citation holds only when both are true.
    """

    sentence: int
    chunk_id: str
    quote_verified: bool
    supports: bool | None

    @property
    def holds(self) -> bool:
        return self.quote_verified and self.supports is True


@dataclass(frozen=True, slots=True)
class ChunkRelevance:
    """Whether one context chunk is relevant to the question (reference-free context precision)."""

    chunk_id: str
    relevant: bool


@dataclass(frozen=True, slots=True)
class RefusalVerdict:
    """Whether the system should have answered. ``answerable`` is the judge's (or golden set's) view."""

    answerable: bool | None


@dataclass(frozen=True, slots=True)
class Verdicts:
    """Everything a judge returned for one trace."""

    judge_fingerprint: str
    claims: tuple[ClaimVerdict, ...] = ()
    citations: tuple[CitationVerdict, ...] = ()
    answer_relevance: float | None = None  # 0..1, how directly the answer addresses the question
    refusal: RefusalVerdict = field(default_factory=lambda: RefusalVerdict(None))
    chunks: tuple[ChunkRelevance, ...] = ()
    #: sentences of the answer that the judge split claims and citations against
    sentences: tuple[str, ...] = ()
    #: what the answer text does, when the judge saw it differ from the trace's ``behaviour`` (e.g. a
    #: "refusal" written as an answer: 'refuse'); None means the judge took the trace's word for it
    observed_behaviour: str | None = None
