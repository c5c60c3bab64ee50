"""The golden case contract, version 1: one adjudicated question with its reference passages.

A golden set is a JSON array of these. The fields follow the evaluation-set schema of the source article
(id, question, category, expected_behaviour, reference_answer, reference_passages, corpus_snapshot, source,
adjudication, added), plus graded relevance 0–3 per reference chunk for nDCG. Types only: no I/O.
"""

from __future__ import annotations

from datetime import date
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, model_validator

from ragmon.contracts.trace import Behaviour

SCHEMA_ID = "golden-case.v1"

Grade = Annotated[int, Field(ge=0, le=3)]
#: the grade of a listed reference chunk that carries no explicit grade: it answers the question
DEFAULT_GRADE = 3


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ReferencePassage(_Strict):
    doc_id: str = Field(min_length=1, description="The document holding the answer.")
    doc_version: str = Field("", description="Document version the annotation was made against.")
    locator: str = Field("", description="Human-readable location (section, page) so a person can re-check it.")
    chunk_ids: list[str] = Field(
        min_length=1, description="Chunk ids that answer the question; these make retrieval measurable."
    )
    grades: dict[str, Grade] = Field(
        default_factory=dict,
        description="Graded relevance 0–3 per chunk id (3 = answers it, 2 = most of it, 1 = related, 0 = not "
        "relevant). Chunks listed in chunk_ids without a grade count as 3.",
    )

    @model_validator(mode="after")
    def _grades_name_listed_chunks(self) -> ReferencePassage:
        unknown = sorted(set(self.grades) - set(self.chunk_ids))
        if unknown:
            raise ValueError(f"grades name chunk ids not in chunk_ids: {', '.join(unknown)}")
        return self


class Adjudication(_Strict):
    reviewers: list[str] = Field(default_factory=list, description="Who adjudicated the case.")
    agreed: bool = Field(True, description="Whether the reviewers agreed; disagreement is recorded, not voted away.")
    note: str = Field("", description="Why they disagreed, or anything a later reader needs.")


class GoldenCase(_Strict):
    model_config = ConfigDict(
        extra="forbid",
        frozen=True,
        title="ragmon golden case v1",
        json_schema_extra={"$id": "https://ragmon.dev/schemas/golden-case.v1.schema.json"},
    )

    id: str = Field(min_length=1, max_length=256, description="Stable id, so a regressed case is discussed by name.")
    question: str = Field(min_length=1, description="The user's phrasing, verbatim from the log.")
    category: str = Field(min_length=1, description="The stratum; every report is per category.")
    expected_behaviour: Behaviour = Field(description="answer, refuse, clarify or route.")
    reference_answer: str = Field("", description="What a competent human would answer.")
    reference_passages: list[ReferencePassage] = Field(
        default_factory=list, description="Where the answer is; empty for cases that must not be answered."
    )
    corpus_snapshot: str = Field("", description="The corpus snapshot the case was adjudicated against.")
    source: str = Field("", description="Provenance: the ticket, transcript or thread the question came from.")
    adjudication: Adjudication = Field(default_factory=Adjudication,
                                       description="Who reviewed it and whether they agreed.")
    added: date | None = Field(None, description="When the case joined the set.")
    tags: list[str] = Field(default_factory=list, description="Question types (multi-passage, wrong premise, …).")
    tenant: str = Field(
        "", max_length=256,
        description="For a permission-scoped case: the asking user's tenant. The gate calls the retriever with "
        "tenant= when it takes one, and fails on any retrieved chunk of another (non-shared) tenant.",
    )

    @model_validator(mode="after")
    def _answerable_cases_have_passages(self) -> GoldenCase:
        if self.expected_behaviour == Behaviour.answer and not self.reference_passages:
            raise ValueError("expected_behaviour 'answer' needs at least one reference passage")
        if self.expected_behaviour == Behaviour.answer and not self.relevant_chunks():
            # nothing to find: recall, MRR and nDCG would be undefined and the case could never fail the gate
            raise ValueError("expected_behaviour 'answer' needs at least one reference chunk of grade 1 or more "
                             "(every listed chunk is graded 0: not relevant)")
        return self

    def relevance(self) -> dict[str, int]:
        """Chunk id → graded relevance 0–3 over all reference passages (highest grade wins)."""
        grades: dict[str, int] = {}
        for passage in self.reference_passages:
            for chunk in passage.chunk_ids:
                grade = passage.grades.get(chunk, DEFAULT_GRADE)
                grades[chunk] = max(grade, grades.get(chunk, 0))
        return grades

    def relevant_chunks(self) -> set[str]:
        """Chunk ids with grade ≥ 1: the set recall, MRR and hit rate count as relevant."""
        return {c for c, g in self.relevance().items() if g >= 1}


GoldenSet = TypeAdapter(list[GoldenCase])
