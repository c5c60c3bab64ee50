"""Canary queries: live pairs whose question matches a golden case get recall@k, reciprocal rank and nDCG@k
on both sides, with the same metric functions the offline gate uses (``ragmon.metrics.retrieval``).

Matching is by question text, normalized the same way here and in SQL (``queries.NORMALIZED_QUESTION_SQL``:
runs of ASCII whitespace → one space, trimmed, lower-cased): the golden set records the user's phrasing verbatim from
the log, so a canary query replays it. Only golden cases with reference passages take part (cases that must be refused
have nothing to retrieve). The query that finds them is ``queries.canary_sql``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ragmon.contracts.golden import GoldenCase, GoldenSet
from ragmon.errors import InputError
from ragmon.metrics.summary import score_ranking

CANARY_METRICS = ("recall_at_k", "mrr", "ndcg_at_k")
_WS = re.compile(r"[ \t\n\r\f]+")


def normalize_question(text: str) -> str:
    return _WS.sub(" ", text).strip(" ").lower()


def load_golden(path: Path) -> list[GoldenCase]:
    """Read a golden set (a JSON array of golden-case.v1); InputError says which case and field is wrong."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise InputError(f"--golden {path}: cannot read the file ({exc.strerror or exc})") from None
    try:
        return GoldenSet.validate_json(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ()))
        raise InputError(f"--golden {path}: not a valid golden set at {where or 'top level'}: {first.get('msg')} "
                         f"({exc.error_count()} problem(s); `ragmon schema export` writes the JSON schema)") from None


def canary_index(cases: Sequence[GoldenCase]) -> tuple[dict[str, GoldenCase], list[str]]:
    """Normalized question → case (answerable cases only), and notices about skipped or duplicate cases."""
    index: dict[str, GoldenCase] = {}
    notes: list[str] = []
    skipped = 0
    for case in cases:
        if not case.relevant_chunks():
            skipped += 1
            continue
        key = normalize_question(case.question)
        if key in index:
            notes.append(f"golden cases {index[key].id!r} and {case.id!r} share a question; using {index[key].id!r}")
            continue
        index[key] = case
    if skipped:
        notes.append(f"{skipped} golden case(s) have no relevant chunks (refuse/clarify cases) and are not canaries")
    return index, notes




def score_canaries(rows: list[dict[str, Any]], index: dict[str, GoldenCase], k: int) -> dict[str, dict[str, Any]]:
    """query_id → {stratum, question, case, b_ids, c_ids, metrics: {name: (baseline, candidate)}}.

    A metric that is None on a side (nothing relevant to find) is left out, never counted as 0.
    """
    out: dict[str, dict[str, Any]] = {}
    for row in rows:
        case = index.get(row["key"])
        if case is None:
            continue
        relevant, grades = case.relevant_chunks(), case.relevance()
        b, c = list(row["b_ids"]), list(row["c_ids"])
        metrics: dict[str, tuple[float, float]] = {}
        sb, sc = score_ranking(b, grades, k), score_ranking(c, grades, k)  # the gate's own function, at this k
        for name, vb, vc in (
            ("recall_at_k", sb.recall_at_k, sc.recall_at_k),
            ("mrr", sb.reciprocal_rank_at_k, sc.reciprocal_rank_at_k),
            ("ndcg_at_k", sb.ndcg_at_k, sc.ndcg_at_k),
        ):
            if vb is not None and vc is not None:
                metrics[name] = (float(vb), float(vc))
        out[row["query_id"]] = {"stratum": row["stratum"], "question": row["question"], "case": case.id,
                                "relevant": tuple(sorted(relevant)), "b_ids": b, "c_ids": c, "metrics": metrics}
    return out
