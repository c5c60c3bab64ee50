"""Reading an LLM judge's JSON answer into ``Verdicts`` — where a lying or broken model is caught.

Owns the structural check of the model output (msgspec, against the shape in ``prompt.OUTPUT_SCHEMA``) and
the code checks that override the model: a claim the model calls supported counts only if one of its quotes
occurs in the chunk it names; citation quotes are verified against the cited chunk; chunk ids the trace does
not have are ignored. Malformed output raises ``MalformedOutput`` (never a guessed verdict). No I/O.
"""

from __future__ import annotations

import math
from typing import Annotated, Literal

import msgspec

from ragmon.errors import JudgeError
from ragmon.judge.base import JudgeInput, citation_verdict, verify_evidence
from ragmon.metrics.verdicts import ChunkRelevance, ClaimVerdict, RefusalVerdict, Verdicts

YesNo = Literal["yes", "no", "unsure"]


class MalformedOutput(JudgeError):
    """The model's answer is not JSON of the required shape (worth one more try: sampling may differ)."""

    retryable = True


class _Evidence(msgspec.Struct, forbid_unknown_fields=True):
    chunk_id: str
    quote: str


class _Claim(msgspec.Struct, forbid_unknown_fields=True):
    claim: str
    supported: YesNo
    evidence: list[_Evidence] = []


class _Citation(msgspec.Struct, forbid_unknown_fields=True):
    index: int
    supports: YesNo
    quote: str = ""


class _Chunk(msgspec.Struct, forbid_unknown_fields=True):
    chunk_id: str
    relevant: bool


class _Output(msgspec.Struct, forbid_unknown_fields=True):
    claims: Annotated[list[_Claim], msgspec.Meta(max_length=1000)]
    citations: Annotated[list[_Citation], msgspec.Meta(max_length=1000)]
    answer_relevance: float
    answerable: YesNo
    chunks: Annotated[list[_Chunk], msgspec.Meta(max_length=1000)]
    answer_is_refusal: bool


_TRI = {"yes": True, "no": False, "unsure": None}


def parse_verdicts(content: str | None, item: JudgeInput, fingerprint: str) -> Verdicts:
    """Turn the model's message content into verified ``Verdicts``; raise ``MalformedOutput`` if it is not."""
    if not content or not content.strip():
        raise MalformedOutput("the judge model returned an empty message")
    try:
        out = msgspec.json.decode(_strip_fence(content).encode("utf-8"), type=_Output)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise MalformedOutput(f"the judge model's answer is not valid verdict JSON: {str(exc)[:200]}") from None
    if not math.isfinite(out.answer_relevance) or not 0 <= out.answer_relevance <= 1:
        raise MalformedOutput(f"answer_relevance {out.answer_relevance!r} is outside [0, 1]")

    claims = []
    for c in out.claims:
        evidence = tuple(verify_evidence(item, e.chunk_id, e.quote) for e in c.evidence)
        supported = _TRI[c.supported]
        if supported is True and not any(e.verified for e in evidence):
            supported = False  # "supported" with no quote found in the named chunk: not trusted
        claims.append(ClaimVerdict(c.claim, supported, evidence))

    by_index = {c.index: c for c in out.citations}
    citations = []
    for i, ref in enumerate(item.citations):
        said = by_index.get(i)
        citations.append(citation_verdict(item, ref, _TRI[said.supports] if said else None,
                                          judge_quote=(said.quote or None) if said else None))

    known = {c.chunk_id for c in item.chunks}
    seen: dict[str, bool] = {}
    for ch in out.chunks:
        if ch.chunk_id in known and ch.chunk_id not in seen:
            seen[ch.chunk_id] = ch.relevant
    refusal_text = out.answer_is_refusal and item.behaviour == "answer"
    return Verdicts(
        judge_fingerprint=fingerprint,
        claims=tuple(claims),
        citations=tuple(citations),
        answer_relevance=None if item.behaviour != "answer" or refusal_text else float(out.answer_relevance),
        refusal=RefusalVerdict(_TRI[out.answerable]),
        chunks=tuple(ChunkRelevance(c.chunk_id, seen[c.chunk_id]) for c in item.chunks if c.chunk_id in seen),
        sentences=item.sentences,
        observed_behaviour="refuse" if refusal_text else None,
    )


def _strip_fence(content: str) -> str:
    # some OpenAI-compatible servers wrap JSON in a markdown fence even in JSON mode
    text = content.strip()
    if text.startswith("```") and text.endswith("```"):
        text = text[3:-3]
        if text.startswith("json"):
            text = text[4:]
    return text
