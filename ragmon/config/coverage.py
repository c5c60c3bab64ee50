"""The ``coverage`` section: whether the golden set still describes live traffic's question types.

Owns the question-type taxonomy (the closed list the classifier chooses from), where the golden set is, and the
thresholds of the comparison. Classifying traces is ``ragmon.judge.classify``; comparing and exporting is
``ragmon.coverage``. Must not read the golden set or query the store.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator

from ragmon.config.section import Section

#: the question types of the evaluation-set article, each failing in its own way (docs/coverage.md)
DEFAULT_QUESTION_TYPES = (
    "single-fact", "multi-passage", "table-number", "out-of-scope", "ambiguous", "wrong-premise", "multi-turn",
    "permission-scoped",
)  # fmt: skip
#: the label of a question that fits none of the types (always part of the closed list)
OTHER = "other"


class CoverageSettings(Section):
    enabled: bool = Field(True, description="Classify each scored trace's question type (stored in question_types).")
    classifier: Literal["heuristic", "judge"] = Field(
        "heuristic", description="'heuristic': keyword rules, no model (docs/coverage.md). 'judge': the judge's "
        "OpenAI-compatible endpoint and model with a closed-list prompt (one more call per scored trace; needs "
        "judge.kind 'openai', otherwise the heuristic rules are used).",
    )
    question_types: list[str] = Field(
        default_factory=lambda: list(DEFAULT_QUESTION_TYPES), min_length=1, max_length=50,
        description="The closed list of question types. A golden case's type is its first tag in this list; the "
        "classifier picks one of these (or 'other') for a live question. Part of the classifier fingerprint.",
    )
    golden_path: Path | None = Field(
        None, description="Golden set (JSON) the coverage role (roles.coverage) compares with live traffic every "
        "interval_seconds; "
        "unset: no periodic coverage check (the command `ragmon golden coverage --golden` still works).",
    )
    interval_seconds: float = Field(3600.0, ge=60, le=7 * 86400, description="Time between periodic coverage checks.")
    window_days: float = Field(7.0, gt=0, le=90, description="Live traffic compared: the last this-many days.")
    min_traces: int = Field(
        50, ge=5, le=1_000_000, description="A stratum with fewer classified live traces is reported as too small."
    )
    max_distance: float = Field(
        0.2, gt=0, le=1, description="Total variation distance between the golden set's and traffic's question-type "
        "shares above which a stratum no longer matches (the decision; the G-test p-value must also be small).",
    )
    alpha: float = Field(0.01, gt=0, lt=1, description="Significance level of the G-test of the two distributions.")
    min_share_gap: float = Field(
        0.05, gt=0, le=1, description="A type is under-represented when its share of traffic exceeds its share of "
        "the golden set by at least this much.",
    )

    @field_validator("question_types")
    @classmethod
    def _distinct_names(cls, value: list[str]) -> list[str]:
        bad = [t for t in value if not t or len(t) > 64 or not t.replace("-", "").replace("_", "").isalnum()]
        if bad:
            raise ValueError(f"question types must be 1-64 letters, digits, '-' or '_': {bad}")
        if len(set(value)) != len(value) or OTHER in value:
            raise ValueError(f"question types must be distinct and must not include {OTHER!r} (always added)")
        return value
