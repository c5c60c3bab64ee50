"""The WHERE clause builder's queries against the real embedded ClickHouse: a hostile filter value matches only
itself, as a value, in the score report and in the labels read for calibration."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from ragmon.score.labels import pairs_from_store
from ragmon.score.report import score_report
from ragmon.where import Where

HOSTILE = "x' OR '1'='1"
NOW = datetime.now(UTC)


def _scores(store, retrievers: list[str]) -> None:
    n = len(retrievers)
    ids = [f"t{i}" for i in range(n)]
    store.insert_columns("scores", {
        "trace_id": ids, "query_id": ids, "ts": [NOW] * n, "scored_at": [NOW] * n, "retriever_name": retrievers,
        "retriever_version": ["v1"] * n, "variant": ["production"] * n, "category": ["billing"] * n,
        "metric": ["faithfulness"] * n, "value": [1.0] * n, "status": ["ok"] * n, "judge_fingerprint": ["fp"] * n,
    })


def test_a_hostile_value_filters_as_a_value(store) -> None:
    _scores(store, ["hybrid", "dense", HOSTILE])
    window = (NOW - timedelta(hours=1), NOW + timedelta(hours=1))
    assert {r.retriever for r in score_report(store, *window)} == {"hybrid@v1", "dense@v1", f"{HOSTILE}@v1"}
    assert {r.retriever for r in score_report(store, *window, retriever=HOSTILE)} == {f"{HOSTILE}@v1"}
    assert score_report(store, *window, retriever="nobody' OR '1'='1") == []
    sql, params = Where().require("retriever_name", "IN", "Array(String)", [HOSTILE, "dense"], name="names").clause()
    rows = store.query_rows(f"SELECT trace_id FROM {store.table('scores')} WHERE {sql} ORDER BY trace_id", params)
    assert [r["trace_id"] for r in rows] == ["t1", "t2"]


def test_optional_filters_of_the_calibration_labels(store) -> None:
    _scores(store, ["hybrid", "hybrid"])
    store.insert_rows("review_labels", [["t0", "ana", NOW - timedelta(days=2), 1, "2026-W49"],
                                        ["t1", "ana", NOW, 1, "2026-W49"]],
                      ["trace_id", "reviewer", "labelled_at", "grounded", "week"])
    assert {p.trace_id for p in pairs_from_store(store)} == {"t0", "t1"}
    assert {p.trace_id for p in pairs_from_store(store, since=NOW - timedelta(days=1))} == {"t1"}
    assert {p.trace_id for p in pairs_from_store(store, until=NOW - timedelta(days=1))} == {"t0"}
    assert pairs_from_store(store, fingerprint=HOSTILE) == []
    assert {p.trace_id for p in pairs_from_store(store, fingerprint="fp")} == {"t0", "t1"}
