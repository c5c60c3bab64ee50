"""Judge agreement's SQL, and the seam it reads through: ``AgreementStore``.

Owns every SQL string of ``ragmon.judge_agreement``: each human label of ``review_labels`` joined with the judge's
``ok`` scores of the same trace for the metrics labels are compared with (FINAL on both: a re-written label or
score counts once). Every value is a ``{name:Type}`` parameter; only table names are formatted in. Must not
binarize, group or decide anything (``job.py`` does).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

_SQL = """SELECT l.week AS week, l.trace_id AS trace_id, l.reviewer AS reviewer, l.grounded AS grounded,
    l.citations_supported AS citations_supported, l.refusal_appropriate AS refusal_appropriate,
    s.category AS category, s.metric AS metric, s.value AS value, s.judge_fingerprint AS fingerprint,
    s.judge_name AS judge_name
FROM (SELECT week, trace_id, reviewer, grounded, citations_supported, refusal_appropriate
      FROM {labels} FINAL WHERE week >= {{since:String}}) AS l
INNER JOIN (SELECT trace_id, category, metric, value, judge_fingerprint, judge_name
            FROM {scores} FINAL WHERE status = 'ok' AND metric IN {{metrics:Array(String)}}) AS s
ON l.trace_id = s.trace_id"""


class AgreementStore(Protocol):
    """What judge agreement reads through (``ClickHouseStore`` satisfies it). Read-only; blocking; raises
    ``StoreError``."""

    def table(self, name: str) -> str: ...

    def query_rows(self, sql: str, parameters: dict[str, Any] | None = None) -> list[dict[str, Any]]: ...


def labelled_scores(store: AgreementStore, since_week: str, metrics: Sequence[str]) -> list[dict[str, Any]]:
    """Per label of a review week >= ``since_week`` and judge ``ok`` score of its trace in ``metrics``: the label's
    verdicts, the score's value, stratum, fingerprint and judge name."""
    sql = _SQL.format(labels=store.table("review_labels"), scores=store.table("scores"))
    return store.query_rows(sql, {"since": since_week, "metrics": list(metrics)})
