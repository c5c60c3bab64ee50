"""Reading scores back: per judge fingerprint, retriever, variant, metric and stratum — never averaged across
fingerprints, nor across retrievers or variants (a shadow twin is scored with its production query: pooling them
would count the query twice and mix two systems).

Owns the report query over the ``scores`` table (read with FINAL, so a re-scored trace counts once). Every
row of the result carries the fingerprint; there is no code path that groups scores without it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from ragmon.score import queries
from ragmon.score.queries import ScoreStore

#: the stratum label of the all-strata row
ALL = "*"
#: grouping(category) on the all-strata row (SQL-standard semantics: 1 = aggregated over)
WHOLE = 1


@dataclass(frozen=True, slots=True)
class ScoreReportRow:
    """One (fingerprint, retriever, variant, metric, stratum) cell: mean of ok values, counts by status."""

    judge_fingerprint: str
    judge_name: str
    retriever: str  # name@version
    variant: str
    metric: str
    category: str
    n_ok: int
    n_not_applicable: int
    n_failed: int
    mean: float | None


def score_report(store: ScoreStore, since: datetime, until: datetime, *, retriever: str | None = None,
                 variant: str | None = None) -> list[ScoreReportRow]:
    """Rows ordered by fingerprint, retriever, variant, metric, stratum; the all-strata row of each (ALL) first."""
    rows = queries.report_rows(store, since, until, retriever=retriever, variant=variant)
    out = []
    for r in rows:
        mean = r["mean"]
        out.append(ScoreReportRow(
            r["judge_fingerprint"], r["judge_name"], r["retriever"], r["variant"], r["metric"],
            ALL if r["whole"] == WHOLE else r["category"],
            int(r["n_ok"]), int(r["n_na"]),
            int(r["n_failed"]), None if mean is None or mean != mean else float(mean),
        ))
    return out
