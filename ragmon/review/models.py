"""The review JSON API's request and response models (pydantic), so the OpenAPI schema describes every body.

Also the one validation of a label, shared by the HTML form and the API. Types only: no I/O.
"""

from __future__ import annotations

import math
from datetime import datetime
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

from ragmon.contracts.trace import Behaviour
from ragmon.review.item_view import ItemView
from ragmon.review.labels import Disagreement
from ragmon.review.queue import QueueItem, StratumProgress, Week
from ragmon.review.records import Label, Verdict

MAX_NOTE_CHARS = 10_000
MAX_REFERENCE_ANSWER_CHARS = 20_000


class LabelIn(BaseModel):
    """One reviewer's judgement. ``null`` in a yes/no field means unsure (or, for refusal, not applicable)."""

    model_config = ConfigDict(extra="forbid")

    answer_correct: bool | None = Field(description="The answer is correct.")
    grounded: bool | None = Field(description="Every claim of the answer is supported by the retrieved text.")
    citations_supported: bool | None = Field(description="Each cited chunk supports the sentence citing it.")
    refusal_appropriate: bool | None = Field(
        description="The decision to answer, refuse, clarify or route was right (null: not applicable).")
    expected_behaviour: Behaviour = Field(description="What the system should have done.")
    note: str = Field("", max_length=MAX_NOTE_CHARS, description="Free text for a later reader.")
    reference_answer: str = Field("", max_length=MAX_REFERENCE_ANSWER_CHARS,
                                  description="What a competent human would answer (for the golden set).")
    relevant_chunk_ids: list[Annotated[str, Field(max_length=256)]] = Field(default_factory=list, max_length=1000,
                                          description="Retrieved chunk ids that answer the question.")
    add_to_golden: bool = Field(False, description="Export this item to the golden set.")


    def to_label(self, week: str, trace_id: str, reviewer: str, labelled_at: datetime,
                 retrieved_chunk_ids: set[str]) -> Label:
        """The label to store; ``ValueError`` when it names chunks the trace did not retrieve."""
        unknown = sorted(set(self.relevant_chunk_ids) - retrieved_chunk_ids)
        if unknown:
            shown = ", ".join(repr(c[:80]) for c in unknown[:5])
            raise ValueError(f"relevant_chunk_ids name chunks this trace did not retrieve: {shown}")
        return Label(week, trace_id, reviewer, labelled_at, self.answer_correct, self.grounded,
                     self.citations_supported, self.refusal_appropriate, self.expected_behaviour.value,
                     self.add_to_golden, self.note, tuple(dict.fromkeys(self.relevant_chunk_ids)),
                     self.reference_answer)


class LabelOut(LabelIn):
    reviewer: str
    labelled_at: datetime

    @classmethod
    def of(cls, label: Label) -> LabelOut:
        return cls(reviewer=label.reviewer, labelled_at=label.labelled_at, answer_correct=label.answer_correct,
                   grounded=label.grounded, citations_supported=label.citations_supported,
                   refusal_appropriate=label.refusal_appropriate,
                   expected_behaviour=Behaviour(label.expected_behaviour),
                   note=label.note, reference_answer=label.reference_answer,
                   relevant_chunk_ids=list(label.relevant_chunk_ids), add_to_golden=label.add_to_golden)


class ProgressOut(BaseModel):
    stratum: str
    total: int
    reviewed: int = Field(description="Items with at least one label.")
    mine: int = Field(description="Items the caller labelled.")

    @classmethod
    def of(cls, p: StratumProgress) -> ProgressOut:
        return cls(stratum=p.stratum, total=p.total, reviewed=p.reviewed, mine=p.mine)


class QueueItemOut(BaseModel):
    trace_id: str
    category: str
    position: int
    labels: int = Field(description="How many reviewers labelled it.")
    labelled_by_me: bool

    @classmethod
    def of(cls, item: QueueItem, reviewer: str) -> QueueItemOut:
        return cls(trace_id=item.trace_id, category=item.category, position=item.position, labels=len(item.labels),
                   labelled_by_me=item.labelled_by(reviewer))


class WeekOut(BaseModel):
    week: str
    seed: str = Field(description="The recorded seed that reproduces the sample.")
    size: int
    population: int = Field(description="Production traces in the week when it was selected.")
    progress: list[ProgressOut]

    @classmethod
    def of(cls, week: Week, reviewer: str) -> WeekOut:
        return cls(week=week.week, seed=week.seed, size=week.size, population=week.population,
                   progress=[ProgressOut.of(p) for p in week.progress(reviewer)])


class QueueOut(WeekOut):
    items: list[QueueItemOut]


class WeeksOut(BaseModel):
    weeks: list[WeekOut]


class ChunkOut(BaseModel):
    rank: int
    chunk_id: str
    doc_id: str
    doc_version: str
    score: float | None
    text: str
    in_context: bool
    cited: bool


class CitationOut(BaseModel):
    sentence: int
    chunk_id: str
    quote: str
    quote_found: bool = Field(description="The quote occurs in the cited chunk's text (case and spaces ignored).")
    chunk_retrieved: bool


class VerdictOut(BaseModel):
    metric: str
    value: float | None = Field(description="null when not finite (a failed score).")
    status: str
    error: str
    judge_name: str
    judge_fingerprint: str
    details: Any = None

    @classmethod
    def of(cls, v: Verdict) -> VerdictOut:
        return cls(metric=v.metric, value=v.value if math.isfinite(v.value) else None, status=v.status, error=v.error,
                   judge_name=v.judge_name, judge_fingerprint=v.judge_fingerprint, details=v.details)


class DisagreementOut(BaseModel):
    field: str
    values: dict[str, bool | str | None] = Field(description="reviewer → answer")

    @classmethod
    def of(cls, d: Disagreement) -> DisagreementOut:
        return cls(field=d.field, values=dict(d.values))


class ItemOut(BaseModel):
    week: str
    trace_id: str
    timestamp: str
    question: str
    category: str
    behaviour: str
    answer: str
    sentences: list[str]
    citations: list[CitationOut]
    chunks: list[ChunkOut]
    versions: dict[str, str]
    my_label: LabelOut | None
    revealed: bool = Field(description="The caller has labelled the item, so verdicts and others' labels are shown.")
    labels: list[LabelOut] = Field(description="Every reviewer's label; empty until the caller labelled the item.")
    disagreements: list[DisagreementOut]
    verdicts: list[VerdictOut] = Field(description="The judge's scores; empty until the caller labelled the item.")

    @classmethod
    def of(cls, week: str, view: ItemView, labels: list[Label], disagreements: list[Disagreement],
           verdicts: list[Verdict], reviewer: str) -> ItemOut:
        mine = next((lab for lab in labels if lab.reviewer == reviewer), None)
        revealed = mine is not None
        return cls(
            week=week, trace_id=view.trace_id, timestamp=view.timestamp, question=view.question,
            category=view.category, behaviour=view.behaviour, answer=view.answer,
            sentences=[s.text for s in view.sentences],
            citations=[CitationOut(sentence=s.index, chunk_id=c.chunk_id, quote=c.quote, quote_found=c.quote_found,
                                   chunk_retrieved=c.anchor is not None)
                       for s in view.sentences for c in s.citations],
            chunks=[ChunkOut(rank=c.rank, chunk_id=c.chunk_id, doc_id=c.doc_id, doc_version=c.doc_version,
                             score=c.score if math.isfinite(c.score) else None, text=c.text,
                             in_context=c.in_context, cited=c.cited) for c in view.chunks],
            versions=view.versions,
            my_label=LabelOut.of(mine) if mine else None,
            revealed=revealed,
            labels=[LabelOut.of(lab) for lab in labels] if revealed else [],
            disagreements=[DisagreementOut.of(d) for d in disagreements] if revealed else [],
            verdicts=[VerdictOut.of(v) for v in verdicts] if revealed else [],
        )


class ErrorOut(BaseModel):
    detail: str | list[Any] = Field(description="What was wrong (a list of field problems for invalid bodies).")
