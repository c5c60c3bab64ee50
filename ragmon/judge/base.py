"""The ``Judge`` contract: what every judge (heuristic or LLM) takes, returns, and how it is identified.

Owns: ``JudgeInput`` (the part of a trace a judge may look at, and its content hash), the judge
``fingerprint`` (a hash of everything that can change a verdict), evidence verification in code (a quote
counts only if it occurs in the chunk it cites), and the ``Judgement``/``Usage`` records. It must not call
a model, touch the store or read a clock: judges do that, this module only defines the seam.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from ragmon.judge.text import evidence_holds, sentences
from ragmon.metrics import verify_citation
from ragmon.metrics.verdicts import CitationVerdict, Evidence, Verdicts


@dataclass(frozen=True, slots=True)
class Chunk:
    """One chunk the answer was generated from. ``text`` None: the producer did not send the text."""

    chunk_id: str
    text: str | None


@dataclass(frozen=True, slots=True)
class CitationRef:
    """A citation as the trace states it: answer sentence index, cited chunk, optional quote."""

    sentence: int
    chunk_id: str
    quote: str | None


@dataclass(frozen=True, slots=True)
class JudgeInput:
    """The judge's view of one trace. Chunk text is untrusted data; it is never treated as instructions.

    ``chunks`` are the context chunks in prompt order; when a producer sends no context list, the ranked
    retrieval is judged instead (it is what the model could have seen).
    """

    trace_id: str
    query_id: str
    question: str
    answer: str
    behaviour: str
    chunks: tuple[Chunk, ...]
    citations: tuple[CitationRef, ...] = ()
    category: str = ""
    retriever: str = ""
    variant: str = "production"
    sentences: tuple[str, ...] = field(default=())

    def __post_init__(self) -> None:
        if not self.sentences:
            object.__setattr__(self, "sentences", tuple(sentences(self.answer)))

    @classmethod
    def of(cls, trace: Any) -> JudgeInput:
        """Build from a ``FastTrace``, a pydantic ``Trace`` or a trace.v1 dict."""
        if isinstance(trace, JudgeInput):
            return trace
        get = _get
        retriever = get(trace, "retriever")
        retrieved = get(trace, "retrieved") or []
        texts = {get(r, "chunk_id"): get(r, "text") for r in retrieved}
        context = get(trace, "context")
        ids = list(get(context, "chunk_ids") or []) if context is not None else []
        if not ids:
            ids = [get(r, "chunk_id") for r in sorted(retrieved, key=lambda r: get(r, "rank"))]
        citations = tuple(
            CitationRef(int(get(c, "sentence")), str(get(c, "chunk_id")), get(c, "quote"))
            for c in get(trace, "citations") or []
        )
        behaviour = get(trace, "behaviour") or "answer"
        variant = get(retriever, "variant") or "production"
        return cls(
            trace_id=str(get(trace, "trace_id")),
            query_id=str(get(trace, "query_id")),
            question=get(trace, "question") or "",
            answer=get(trace, "answer") or "",
            behaviour=str(getattr(behaviour, "value", behaviour)),
            chunks=tuple(Chunk(cid, texts.get(cid)) for cid in dict.fromkeys(ids)),
            citations=citations,
            category=get(trace, "category") or "",
            retriever=get(retriever, "name") or "",
            variant=str(getattr(variant, "value", variant)),
        )

    def chunk_text(self, chunk_id: str) -> str | None:
        for chunk in self.chunks:
            if chunk.chunk_id == chunk_id:
                return chunk.text
        return None

    @property
    def content_hash(self) -> str:
        """Hash of what the judge reads (not the ids): identical content is judged once per fingerprint."""
        doc = {
            "question": self.question,
            "answer": self.answer,
            "behaviour": self.behaviour,
            "chunks": [[c.chunk_id, c.text] for c in self.chunks],
            "citations": [[c.sentence, c.chunk_id, c.quote] for c in self.citations],
        }
        return hashlib.sha256(_canonical(doc)).hexdigest()


@dataclass(frozen=True, slots=True)
class Usage:
    """What one judgement cost: tokens, US dollars, HTTP attempts, and whether it came from the cache."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    attempts: int = 0
    cached: bool = False


@dataclass(frozen=True, slots=True)
class Judgement:
    """A judge's verdicts for one trace, with the cost of getting them."""

    verdicts: Verdicts
    usage: Usage = Usage()


@runtime_checkable
class Judge(Protocol):
    """Turns a trace into ``Verdicts`` stamped with the judge's fingerprint.

    ``assess`` blocks until the verdicts are in (an LLM judge retries retryable failures within its deadline)
    and raises ``JudgeError`` (``RetryableJudgeError`` when a later attempt may succeed); it never returns a
    partial or guessed verdict. It is idempotent for a given input and fingerprint. Implementations say
    whether they are thread-safe; the scoring pipeline calls one judge from one thread.
    """

    #: short kind, a bounded label value: 'heuristic', 'openai'
    name: str
    #: the model behind it ('' for the heuristic judge)
    model: str
    #: hash of model, model version, prompt template, temperature and parser version
    fingerprint: str

    def assess(self, item: JudgeInput) -> Judgement: ...

    def judge(self, trace: Any) -> Verdicts: ...


def fingerprint(**parts: Any) -> str:
    """Stable hash of everything that can change a verdict (sorted-key JSON, SHA-256, 16 hex digits)."""
    return hashlib.sha256(_canonical(parts)).hexdigest()[:16]


def verify_evidence(item: JudgeInput, chunk_id: str, quote: str) -> Evidence:
    """Evidence whose ``verified`` flag is decided here, in code: the quote occurs in that context chunk."""
    return Evidence(chunk_id=chunk_id, quote=quote, verified=evidence_holds(quote, item.chunk_text(chunk_id)))


def citation_verdict(item: JudgeInput, citation: CitationRef, supports: bool | None,
                     judge_quote: str | None = None) -> CitationVerdict:
    """A citation's verdict through the metrics library's ``verify_citation`` (the gate's quote check).

    The trace's own quote is checked against the cited chunk; a citation without a quote may be backed by a
    quote the judge found in the cited chunk, checked the same way (and held to ``evidence_holds``' minimum
    length). A chunk that was not in the context cannot back a citation. ``supports`` is the judge's opinion.
    """
    texts = {c.chunk_id: c.text for c in item.chunks}
    if citation.quote:
        return verify_citation(citation.sentence, citation.chunk_id, citation.quote, texts, supports)
    verdict = verify_citation(citation.sentence, citation.chunk_id, judge_quote, texts, supports)
    if verdict.quote_verified and not evidence_holds(judge_quote, texts.get(citation.chunk_id)):
        return CitationVerdict(verdict.sentence, verdict.chunk_id, False, supports)
    return verdict


def _canonical(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def _get(obj: Any, name: str) -> Any:
    return obj.get(name) if isinstance(obj, Mapping) else getattr(obj, name, None)
