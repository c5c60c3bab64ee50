"""Human labels: validating and saving one reviewer's label, and showing where reviewers disagree.

A label is one row per (trace, reviewer) with the time it was given; a reviewer's later label replaces the
earlier one (``ReviewStore.save_label``). Two reviewers' labels are both kept: where they differ the
disagreement is reported field by field, never resolved by a vote. Reading labels is ``ReviewStore.labels_for``
and ``labels_of_week``. Must not: decide anything about the judge, or touch the queue.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ragmon.review.queries import ReviewStore
from ragmon.review.records import Label

__all__ = ["BEHAVIOURS", "JUDGEMENTS", "Disagreement", "Label", "disagreements", "save_label"]

#: the judgement fields compared between reviewers (note, golden flag and reference answer are not judgements)
JUDGEMENTS = ("answer_correct", "grounded", "citations_supported", "refusal_appropriate", "expected_behaviour")
BEHAVIOURS = ("answer", "refuse", "clarify", "route")


@dataclass(frozen=True)
class Disagreement:
    """A judgement field on which reviewers gave different (known) answers: reviewer → value."""

    field: str
    values: dict[str, Any]


def save_label(store: ReviewStore, label: Label) -> None:
    """Store (or replace) ``label.reviewer``'s label of ``label.trace_id``. Blocks until acknowledged."""
    if label.expected_behaviour not in BEHAVIOURS:
        raise ValueError(f"expected_behaviour must be one of {', '.join(BEHAVIOURS)}, got {label.expected_behaviour!r}")
    store.save_label(label)


def disagreements(labels: list[Label]) -> list[Disagreement]:
    """Judgement fields where two reviewers gave different answers ("unsure" disagrees with nobody)."""
    found = []
    for name in JUDGEMENTS:
        values = {lab.reviewer: getattr(lab, name) for lab in labels}
        known = {v for v in values.values() if v is not None}
        if len(known) > 1:
            found.append(Disagreement(name, values))
    return found
