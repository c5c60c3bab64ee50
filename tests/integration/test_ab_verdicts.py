"""`ragmon ab compare` verdicts at the edges, on the real chDB store: a measure without data never lets a candidate
through (the rule shared with `shadow compare`, ``ragmon.metrics.promotion``)."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

from ragmon.ab.compare import HOLD, PROMOTE, AbOptions, Arm, compare
from ragmon.config import AbSettings
from ragmon.outcomes.loop import OutcomeLoop
from ragmon.stream.dead_letter import InMemoryDeadLetterSink
from ragmon.stream.source import InMemoryTraceSource
from tests.conftest import make_trace
from tests.integration.review.support import insert_score, insert_traces

NOW = datetime.now(UTC).replace(microsecond=0)


def _arms(store, n: int, *, feedback: bool, judged: bool) -> tuple[datetime, list[dict]]:
    """Two identical arms of ``n`` traces each: every query resolved; feedback and judge scores when asked."""
    import json

    start = NOW - timedelta(hours=6)
    traces, events = [], []
    for version, variant in (("v1", "production"), ("v2", "canary")):
        for i in range(n):
            ts = start + timedelta(seconds=20 * i)
            qid = f"{version}-{i}"
            traces.append(make_trace(query_id=qid, category="billing", timestamp=ts.isoformat(),
                                     retriever={"name": "hybrid", "version": version, "variant": variant}))
            events.append({"query_id": qid, "kind": "resolved", "time": (ts + timedelta(seconds=30)).isoformat()})
            if feedback:
                events.append({"query_id": qid, "kind": "feedback", "value": 1 if i % 2 else -1,
                               "time": (ts + timedelta(seconds=40)).isoformat()})
    insert_traces(store, traces)
    if judged:
        for t in traces:
            for metric in ("faithfulness", "answer_relevance"):
                insert_score(store, t, metric, 0.9)
    source = InMemoryTraceSource()
    source.append("o", 0, [json.dumps(e).encode() for e in events])
    loop = OutcomeLoop(source, store, InMemoryDeadLetterSink(), AbSettings(flush_interval_seconds=0.05))
    loop.run(threading.Event(), until=lambda: source.lag() == {("o", 0): 0} and loop.idle())
    return start, traces


def _options(start: datetime, **kw) -> AbOptions:
    return AbOptions(Arm.parse("hybrid@v1", "production"), Arm.parse("hybrid@v2", "canary"), start, NOW,
                     join_wait_seconds=600, reformulation_seconds=0, min_per_arm=100, **kw)


def test_a_measure_without_data_holds_the_candidate(store):
    """Identical arms, every rate and the latency ok, but no feedback and nothing judged: not a promotion."""
    start, _ = _arms(store, 250, feedback=False, judged=False)
    result = compare(store, _options(start))
    billing = next(s for s in result.strata if s.stratum == "billing")
    status = {m.name: m.status for m in billing.measures}
    assert status["feedback"] == status["faithfulness"] == status["answer_relevance"] == "no_data"
    assert all(status[m] == "ok" for m in ("citation_opened", "reformulated", "escalated", "resolved", "latency_ms"))
    assert billing.decision == HOLD and result.decision == HOLD and result.exit_code == 4
    why = " ".join(billing.reasons)
    assert "feedback: no data" in why and "faithfulness: no data" in why and "answer_relevance: no data" in why


def test_every_measure_ok_promotes(store):
    """The same arms with feedback and judge scores on both sides: every measure ok, so promote."""
    start, _ = _arms(store, 250, feedback=True, judged=True)
    result = compare(store, _options(start, max_feedback_drop=0.5))
    billing = next(s for s in result.strata if s.stratum == "billing")
    assert {m.name: m.status for m in billing.measures}["feedback"] == "ok"
    assert billing.decision == PROMOTE and result.decision == PROMOTE, billing.reasons


def test_the_json_carries_full_precision_and_times_with_their_zone(store):
    """No statistic rounded in the JSON (a table may round); every time ISO 8601 with its UTC offset."""
    import json
    import math

    from ragmon.ab.report import to_json

    start, traces = _arms(store, 250, feedback=True, judged=False)
    result = compare(store, _options(start, max_feedback_drop=0.5))
    doc = json.loads(to_json(result))
    for t in (*doc["cohort"], doc["since"], doc["until"]):
        assert datetime.fromisoformat(t).utcoffset() == timedelta(0), t
    cohort = [datetime.fromisoformat(t) for t in doc["cohort"]]
    canary = sorted(datetime.fromisoformat(t["timestamp"]) for t in traces if t["retriever"]["version"] == "v2")
    assert cohort == [canary[0].replace(microsecond=canary[0].microsecond // 1000 * 1000),
                      canary[-1].replace(microsecond=canary[-1].microsecond // 1000 * 1000)]
    billing = next(s for s in result.strata if s.stratum == "billing")
    exact = {m.name: m.delta for m in billing.measures}
    listed = {m["name"]: m for m in next(s for s in doc["strata"] if s["stratum"] == "billing")["measures"]}
    for name in ("feedback", "resolved", "escalated"):
        for field in ("delta", "low", "high", "baseline", "candidate"):
            value = getattr(exact[name], field)
            assert listed[name][field] == (value if math.isfinite(value) else None), (name, field)
    assert any(listed["escalated"][f] not in (None, round(listed["escalated"][f], 6)) for f in ("low", "high"))
