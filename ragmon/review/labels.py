"""Human labels: writing one reviewer's label, reading every label of an item, and showing disagreement.

A label is one ``review_labels`` row per (trace, reviewer) with the time it was given; a reviewer's later
label replaces the earlier one (ReplacingMergeTree, read with FINAL). Two reviewers' labels are both kept:
where they differ the disagreement is reported field by field, never resolved by a vote.
Must not: decide anything about the judge, or touch the queue.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ragmon.store import ClickHouseStore

#: the judgement fields compared between reviewers (note, golden flag and reference answer are not judgements)
JUDGEMENTS = ("answer_correct", "grounded", "citations_supported", "refusal_appropriate", "expected_behaviour")
BEHAVIOURS = ("answer", "refuse", "clarify", "route")
_COLUMNS = ("week", "trace_id", "reviewer", "labelled_at", "answer_correct", "grounded", "citations_supported",
            "refusal_appropriate", "expected_behaviour", "add_to_golden", "note", "relevant_chunk_ids",
            "reference_answer")


@dataclass(frozen=True)
class Label:
    """One reviewer's judgement of one trace. ``None`` in a yes/no field means "unsure" or "not applicable"."""

    week: str
    trace_id: str
    reviewer: str
    labelled_at: datetime
    answer_correct: bool | None
    grounded: bool | None
    citations_supported: bool | None
    refusal_appropriate: bool | None
    expected_behaviour: str
    add_to_golden: bool = False
    note: str = ""
    relevant_chunk_ids: tuple[str, ...] = field(default_factory=tuple)
    reference_answer: str = ""


@dataclass(frozen=True)
class Disagreement:
    """A judgement field on which reviewers gave different (known) answers: reviewer → value."""

    field: str
    values: dict[str, Any]


def _bit(value: bool | None) -> int | None:
    return None if value is None else int(value)


def _bool(value: Any) -> bool | None:
    return None if value is None else bool(value)


def save_label(store: ClickHouseStore, label: Label) -> None:
    """Store (or replace) ``label.reviewer``'s label of ``label.trace_id``. Blocks until acknowledged."""
    if label.expected_behaviour not in BEHAVIOURS:
        raise ValueError(f"expected_behaviour must be one of {', '.join(BEHAVIOURS)}, got {label.expected_behaviour!r}")
    row = [label.week, label.trace_id, label.reviewer, label.labelled_at, _bit(label.answer_correct),
           _bit(label.grounded), _bit(label.citations_supported), _bit(label.refusal_appropriate),
           label.expected_behaviour, int(label.add_to_golden), label.note, list(label.relevant_chunk_ids),
           label.reference_answer]
    store.insert_rows("review_labels", [row], _COLUMNS)


def _label(row: dict[str, Any]) -> Label:
    return Label(
        week=str(row["week"]), trace_id=str(row["trace_id"]), reviewer=str(row["reviewer"]),
        labelled_at=row["labelled_at"], answer_correct=_bool(row["answer_correct"]), grounded=_bool(row["grounded"]),
        citations_supported=_bool(row["citations_supported"]),
        refusal_appropriate=_bool(row["refusal_appropriate"]), expected_behaviour=str(row["expected_behaviour"]),
        add_to_golden=bool(row["add_to_golden"]), note=str(row["note"]),
        relevant_chunk_ids=tuple(row["relevant_chunk_ids"]), reference_answer=str(row["reference_answer"]),
    )


def labels_for(store: ClickHouseStore, trace_id: str) -> list[Label]:
    """Every reviewer's current label of one trace, oldest first."""
    rows = store.query_rows(
        f"SELECT {', '.join(_COLUMNS)} FROM {store.table('review_labels')} FINAL "
        "WHERE trace_id = {t:String} ORDER BY labelled_at, reviewer", {"t": trace_id})
    return [_label(r) for r in rows]


def labels_of_week(store: ClickHouseStore, week: str) -> dict[str, list[Label]]:
    """trace id → labels, for every labelled item of the week's queue."""
    rows = store.query_rows(
        f"SELECT {', '.join('l.' + c for c in _COLUMNS)} FROM {store.table('review_labels')} AS l FINAL "
        f"WHERE l.week = {{week:String}} AND l.trace_id IN "
        f"(SELECT trace_id FROM {store.table('review_queue')} WHERE week = {{week:String}}) "
        "ORDER BY l.labelled_at, l.reviewer", {"week": week})
    out: dict[str, list[Label]] = {}
    for r in rows:
        label = _label({k.removeprefix("l."): v for k, v in r.items()})
        out.setdefault(label.trace_id, []).append(label)
    return out


def disagreements(labels: list[Label]) -> list[Disagreement]:
    """Judgement fields where two reviewers gave different answers ("unsure" disagrees with nobody)."""
    found = []
    for name in JUDGEMENTS:
        values = {lab.reviewer: getattr(lab, name) for lab in labels}
        known = {v for v in values.values() if v is not None}
        if len(known) > 1:
            found.append(Disagreement(name, values))
    return found
