"""Golden-set growth: items a reviewer marked "add to golden set" → golden cases (schemas/golden-case.v1).

The case takes the question, stratum and corpus snapshot from the stored trace, the expected behaviour and the
reference passages (chunks the reviewers ticked, grouped by document) from the labels that asked for it, and
an adjudication naming every reviewer of the item, whether all of them agreed, and their notes. Reviewers who
asked for the case but disagree on the expected behaviour produce no case: the item is reported as needing
adjudication (disagreement is never resolved by a vote). Cases already in the target file are kept as they are.
Given the stored question type of each trace (``question_types``, docs/coverage.md), a case is tagged with it,
and the ``prefer``-red types (those the golden set under-represents) are exported first, so a refresh capped at
``limit`` cases adds them before the others. Must not: write anything but the target file.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ragmon.contracts.golden import Adjudication, GoldenCase, GoldenSet, ReferencePassage
from ragmon.errors import InputError
from ragmon.golden_files import write_golden
from ragmon.review.labels import Label, disagreements
from ragmon.review.queries import ReviewStore

UNCATEGORIZED = "uncategorized"


@dataclass(frozen=True)
class ExportResult:
    """What ``export_golden`` did, with the parameters applied."""

    path: Path
    week: str | None
    added: tuple[str, ...]
    already_present: tuple[str, ...]
    skipped: dict[str, str] = field(default_factory=dict)  # case id → why it was not exported
    prefer: tuple[str, ...] = ()
    limit: int | None = None
    #: marked items left for a later export because of ``limit``
    deferred: tuple[str, ...] = ()


def case_id(week: str, trace_id: str) -> str:
    return f"review-{week}-{trace_id}"[:256]


def golden_case(trace: dict[str, Any], labels: list[Label]) -> GoldenCase:
    """The golden case for one item; ``ValueError`` when the labels cannot make one (says why)."""
    asking = [lab for lab in labels if lab.add_to_golden]
    behaviours = {lab.expected_behaviour for lab in asking}
    if len(behaviours) != 1:
        shown = ", ".join(f"{lab.reviewer}={lab.expected_behaviour}" for lab in asking)
        raise ValueError(f"reviewers disagree on the expected behaviour ({shown}); relabel to agree")
    behaviour = behaviours.pop()
    chunks = {c["chunk_id"]: c for c in trace["retrieved"]}
    relevant = [cid for lab in asking for cid in lab.relevant_chunk_ids if cid in chunks]
    by_doc: dict[tuple[str, str], list[str]] = {}
    for cid in dict.fromkeys(relevant):
        by_doc.setdefault((chunks[cid]["doc_id"], chunks[cid]["doc_version"]), []).append(cid)
    passages = [ReferencePassage(doc_id=doc, doc_version=version, chunk_ids=ids)
                for (doc, version), ids in by_doc.items()]
    reference = next((lab.reference_answer for lab in asking if lab.reference_answer), "")
    if not reference and behaviour == "answer" and all(lab.answer_correct for lab in asking):
        reference = trace["answer"]
    disputed = disagreements(labels)
    notes = [f"{lab.reviewer}: {lab.note}" for lab in labels if lab.note]
    notes += [f"disagree on {d.field}: " + ", ".join(f"{r}={v}" for r, v in d.values.items()) for d in disputed]
    week = labels[0].week
    return GoldenCase(
        id=case_id(week, trace["trace_id"]),
        question=trace["question"],
        category=trace["category"] or UNCATEGORIZED,
        expected_behaviour=behaviour,
        reference_answer=reference,
        reference_passages=passages,
        corpus_snapshot=trace["corpus_snapshot"],
        source=f"ragmon weekly review {week}, trace {trace['trace_id']}",
        adjudication=Adjudication(reviewers=sorted({lab.reviewer for lab in labels}), agreed=not disputed,
                                  note="; ".join(notes)),
        added=max(lab.labelled_at for lab in asking).date(),
        tags=["from-review"],
    )


def export_golden(store: ReviewStore, path: Path, *, week: str | None = None, prefer: Sequence[str] = (),
                  limit: int | None = None,
                  question_types: Callable[[list[str]], dict[str, str]] | None = None) -> ExportResult:
    """Append the marked items not yet in ``path`` (a JSON array of golden cases; created if missing).

    ``question_types`` maps trace ids to their stored question type: each case is tagged with its type, items
    of the ``prefer`` types go first (in that order), and at most ``limit`` new cases are added."""
    existing = _read_existing(path)
    known = {c.id for c in existing}
    added, present, skipped, new_cases, deferred = [], [], {}, [], []
    marked = store.golden_marked(week or None)
    types = question_types([t for _, t in marked]) if question_types is not None and marked else {}
    rank = {t: i for i, t in enumerate(prefer)}
    marked = sorted(marked, key=lambda m: rank.get(types.get(m[1], ""), len(rank)))  # stable: sorted within a rank
    for item_week, trace_id in marked:
        cid = case_id(item_week, trace_id)
        if cid in known:
            present.append(cid)
            continue
        trace = store.trace(item_week, trace_id)
        if trace is None:
            skipped[cid] = "the trace is no longer stored (retention TTL)"
            continue
        if limit is not None and len(new_cases) >= limit:
            deferred.append(cid)
            continue
        try:
            case = golden_case(trace, store.labels_for(trace_id))
            if trace_id in types:
                case = case.model_copy(update={"tags": [*case.tags, types[trace_id]]})
        except (ValueError, ValidationError) as exc:
            skipped[cid] = _reason(exc)
            continue
        new_cases.append(case)
        added.append(cid)
    if new_cases or not path.exists():
        write_golden(path, [*existing, *new_cases])
    return ExportResult(path, week, tuple(added), tuple(present), skipped, tuple(prefer), limit, tuple(deferred))


def _reason(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        msgs = [e["msg"].removeprefix("Value error, ") for e in exc.errors()]
        if any("reference passage" in m for m in msgs):
            return "expected behaviour 'answer' needs reference passages: tick the chunks that answer the question"
        return "; ".join(msgs)
    return str(exc)


def _read_existing(path: Path) -> list[GoldenCase]:
    if not path.exists():
        return []
    try:
        return GoldenSet.validate_json(path.read_bytes())
    except OSError as exc:
        raise InputError(f"{path}: cannot read the golden set ({exc.strerror or exc})") from None
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(map(str, first["loc"]))
        raise InputError(f"{path}: not a valid golden set (at {where}: {first['msg']}); fix it or export to a new "
                         "file") from None
