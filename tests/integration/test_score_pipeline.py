"""The live scoring pipeline end to end against chDB: decisions, scores with fingerprints, failures as failures."""

from __future__ import annotations

import json
import logging
import math
from datetime import UTC, datetime, timedelta

import pytest

from ragmon.contracts.decode import decode_trace
from ragmon.errors import JudgeError, RetryableJudgeError
from ragmon.judge import HeuristicJudge, JudgeInput
from ragmon.judge.heuristic import HeuristicParams
from ragmon.judge.openai import OpenAIJudge
from ragmon.judge.scoring import METRICS, score_trace
from ragmon.sampling.sampler import ScoreSampler
from ragmon.score.pipeline import LiveScorer
from ragmon.score.report import ALL, score_report
from ragmon.score.runner import backfill
from ragmon.store import TraceColumns
from ragmon.telemetry import Telemetry
from tests.conftest import make_trace
from tests.support.openai_server import FakeOpenAI, ok, status


def rows(store, sql_tail: str = "", params=None):
    return store.query_rows(f"SELECT * FROM {store.table('scores')} FINAL {sql_tail}", params or {})


def decisions(store):
    return store.query_rows(f"SELECT * FROM {store.table('sampling_decisions')} FINAL ORDER BY trace_id")


class FailingJudge:
    name, model = "failing", "none"
    fingerprint = "f" * 16

    def __init__(self, error: JudgeError):
        self.error, self.calls = error, 0

    def assess(self, item):
        self.calls += 1
        raise self.error

    def judge(self, trace):
        return self.assess(JudgeInput.of(trace))


def test_scores_written_with_fingerprint_using_the_gate_functions(store):
    tel = Telemetry()
    traces = [make_trace(category=c) for c in ["consent", "billing"] * 10]
    judge = HeuristicJudge()
    scorer = LiveScorer(store, judge, ScoreSampler(salt="e2e", rate=0.5), tel)
    result = scorer.process(traces, batch_key="b1")

    d = decisions(store)
    assert len(d) == 20 and {r["decision"] for r in d} <= {"sampled", "not_sampled"}
    sampled = {r["trace_id"] for r in d if r["decision"] == "sampled"}
    assert 0 < len(sampled) < 20 and result.scored == len(sampled)
    stored = rows(store)
    assert {r["trace_id"] for r in stored} == sampled
    assert {r["judge_fingerprint"] for r in stored} == {judge.fingerprint}
    assert len(stored) == len(sampled) * len(METRICS)
    # the live values are exactly what the shared scoring path computes
    by_trace = {t["trace_id"]: t for t in traces}
    for r in stored:
        expected = score_trace(judge, by_trace[r["trace_id"]]).value(r["metric"])
        if expected is None:
            assert r["status"] == "not_applicable" and math.isnan(r["value"])
        else:
            assert r["status"] == "ok" and r["value"] == pytest.approx(expected)
    get = tel.registry.get_sample_value
    assert get("ragmon_score_traces_scored_total") == len(sampled)
    assert get("ragmon_score_sampling_decisions_total", {"decision": "sampled"}) == len(sampled)
    assert get("ragmon_judge_info", {"fingerprint": judge.fingerprint, "judge": "heuristic", "model": "-"}) == 1
    assert get("ragmon_judge_calls_total", {"judge": "heuristic", "outcome": "ok"}) == len(sampled)


def test_judge_failures_recorded_as_failures_never_as_scores(store):
    tel = Telemetry()
    judge = FailingJudge(RetryableJudgeError("judge endpoint answered HTTP 503"))
    scorer = LiveScorer(store, judge, ScoreSampler(salt="f", rate=1.0), tel, judge_attempts=3, sleep=lambda s: None)
    scorer.process([make_trace(), make_trace()], batch_key="b")
    stored = rows(store)
    assert len(stored) == 2 * len(METRICS)
    assert {r["status"] for r in stored} == {"failed"}
    assert all(math.isnan(r["value"]) and "HTTP 503" in r["error"] for r in stored)
    assert judge.calls == 6  # retried judge_attempts times per trace
    assert tel.registry.get_sample_value("ragmon_score_failures_total") == 2
    calls = {o: tel.registry.get_sample_value("ragmon_judge_calls_total", {"judge": "failing", "outcome": o})
             for o in ("retry", "error")}
    assert calls == {"retry": 4, "error": 2}


def test_permanent_judge_error_is_not_retried(store):
    judge = FailingJudge(JudgeError("judge endpoint refused the API key"))
    LiveScorer(store, judge, ScoreSampler(salt="f", rate=1.0), judge_attempts=3).process([make_trace()])
    assert judge.calls == 1


def test_openai_judge_failures_then_success_replace_failed_rows(store):
    with FakeOpenAI(responder=lambda req: status(500, "boom")) as srv:
        judge = OpenAIJudge(base_url=srv.base_url, model="m", deadline_seconds=0.3, backoff_initial_seconds=0.01,
                            backoff_max_seconds=0.02)
        scorer = LiveScorer(store, judge, ScoreSampler(salt="o", rate=1.0), judge_attempts=2, sleep=lambda s: None)
        trace = make_trace()
        scorer.process([trace], batch_key="try-1")
        assert {r["status"] for r in rows(store)} == {"failed"}
        good = {"claims": [], "citations": [{"index": 0, "supports": "yes", "quote": ""}], "answer_relevance": 0.8,
                "answerable": "yes", "chunks": [], "answer_is_refusal": False}
        srv.responder = lambda req: ok(good)
        scorer.process([trace], batch_key="try-2")
    final = {r["metric"]: r for r in rows(store)}
    assert len(final) == len(METRICS) and final["answer_relevance"]["status"] == "ok"
    assert final["answer_relevance"]["value"] == pytest.approx(0.8)
    assert final["citation_precision"]["value"] == 1.0  # the trace's quote really is in policy@c41


def test_reprocessing_a_batch_is_idempotent(store):
    traces = [make_trace() for _ in range(5)]
    scorer = LiveScorer(store, HeuristicJudge(), ScoreSampler(salt="i", rate=1.0))
    scorer.process(traces, batch_key="same")
    scorer.process(traces, batch_key="same")
    assert len(rows(store)) == 5 * len(METRICS) and len(decisions(store)) == 5


def test_twins_scored_together_and_caps_recorded(store):
    traces = []
    for i in range(6):
        traces.append(make_trace(query_id=f"q{i}", trace_id=f"p{i}"))
        traces.append(make_trace(query_id=f"q{i}", trace_id=f"s{i}",
                                 retriever={"name": "hybrid-v2", "version": "v2", "variant": "shadow"}))
    sampler = ScoreSampler(salt="tw", rate=1.0, max_per_hour=4, clock=lambda: 1_780_000_000.0)
    LiveScorer(store, HeuristicJudge(), sampler).process(traces)
    by_id = {r["trace_id"]: r["decision"] for r in decisions(store)}
    assert [by_id[f"p{i}"] for i in range(6)] == ["sampled"] * 4 + ["capped"] * 2
    assert all(by_id[f"p{i}"] == by_id[f"s{i}"] for i in range(6))


def test_budget_exhaustion_recorded_as_over_budget(store):
    class Paid(HeuristicJudge):
        def assess(self, item):
            from ragmon.judge.base import Judgement, Usage
            return Judgement(super().assess(item).verdicts, Usage(cost_usd=0.01))

    sampler = ScoreSampler(salt="b", rate=1.0, daily_budget_usd=0.025, clock=lambda: 1_780_000_000.0)
    result = LiveScorer(store, Paid(), sampler).process([make_trace() for _ in range(5)])
    assert result.decisions == {"sampled": 3, "over_budget": 2}
    assert sorted(r["decision"] for r in decisions(store)) == ["over_budget"] * 2 + ["sampled"] * 3


def test_report_never_mixes_fingerprints_and_change_is_announced(store, caplog):
    traces = [make_trace(category="consent") for _ in range(4)]
    old = HeuristicJudge()
    LiveScorer(store, old, ScoreSampler(salt="r", rate=1.0)).process(traces)
    new = HeuristicJudge(HeuristicParams(support_threshold=0.95))
    scorer = LiveScorer(store, new, ScoreSampler(salt="r", rate=1.0))
    with caplog.at_level(logging.INFO, logger="ragmon.score.pipeline"):
        assert scorer.announce() == old.fingerprint
    assert "judge fingerprint changed" in caplog.text
    scorer.process(traces)
    now = datetime.now(UTC)
    report = score_report(store, now - timedelta(days=1), now + timedelta(days=1))
    faith = [r for r in report if r.metric == "faithfulness"]
    assert {r.judge_fingerprint for r in faith} == {old.fingerprint, new.fingerprint}
    assert {(r.judge_fingerprint, r.category, r.n_ok) for r in faith} == {
        (old.fingerprint, "consent", 4), (old.fingerprint, ALL, 4),
        (new.fingerprint, "consent", 4), (new.fingerprint, ALL, 4)}
    assert {(r.retriever, r.variant) for r in faith} == {("hybrid@v1", "production")}


def test_report_keeps_retrievers_and_variants_apart(store):
    # a shadow twin shares its production query (and so is sampled with it): pooling would mix two systems
    shadow_side = {"name": "dense", "version": "v2", "variant": "shadow", "parameters": {}}
    traces = [make_trace(category="c") for _ in range(3)] + [make_trace(category="c", retriever=shadow_side)
                                                              for _ in range(2)]
    LiveScorer(store, HeuristicJudge(), ScoreSampler(salt="v", rate=1.0)).process(traces)
    now = datetime.now(UTC)
    cells = {(r.retriever, r.variant, r.category): r.n_ok + r.n_not_applicable + r.n_failed
             for r in score_report(store, now - timedelta(days=1), now + timedelta(days=1))
             if r.metric == "faithfulness"}
    assert cells == {("hybrid@v1", "production", "c"): 3, ("hybrid@v1", "production", ALL): 3,
                     ("dense@v2", "shadow", "c"): 2, ("dense@v2", "shadow", ALL): 2}


def test_backfill_from_store(store):
    now = datetime.now(UTC)
    docs = [make_trace(timestamp=(now - timedelta(minutes=i)).isoformat()) for i in range(30)]
    docs.append(make_trace(timestamp=(now - timedelta(days=3)).isoformat()))  # outside the window
    cols = TraceColumns().extend(decode_trace(json.dumps(d).encode()).trace for d in docs)
    store.insert_columns("traces", cols.columns)
    scorer = LiveScorer(store, HeuristicJudge(), ScoreSampler(salt="bf", rate=1.0))
    result = backfill(scorer, store, now - timedelta(hours=1), now + timedelta(minutes=1), page_size=7)
    assert result.scored == 30
    assert len(decisions(store)) == 30
    assert {r["trace_id"] for r in rows(store)} == {d["trace_id"] for d in docs[:30]}


class OneHangingCall:
    """The heuristic judge behind threads (as an HTTP judge runs), except that the call for ``hanging`` holds on
    until ``release`` is set: the slow call of a page that a backfill must not wait for."""

    io_bound = True

    def __init__(self, hanging: str):
        import threading

        self._judge, self.hanging = HeuristicJudge(), hanging
        self.release, self.others_done = threading.Event(), threading.Event()
        self.judged: list[str] = []
        self.expected = 0
        self._lock = threading.Lock()

    def __getattr__(self, name):
        return getattr(self._judge, name)

    def assess(self, item):
        if item.trace_id == self.hanging:
            assert self.release.wait(120), "never released"
        out = self._judge.assess(item)
        with self._lock:
            self.judged.append(item.trace_id)
            if len([t for t in self.judged if t != self.hanging]) == self.expected:
                self.others_done.set()
        return out


def test_backfill_keeps_the_judges_busy_past_a_page_whose_slowest_call_hangs(store):
    """`score --from-store` reads the next page while a call of the previous one is still out: with one call of
    the first page hanging, every other trace of every page is judged (and stored) before it returns."""
    import threading

    now = datetime.now(UTC)
    docs = [make_trace(trace_id=f"bf-{i:02d}", timestamp=(now - timedelta(minutes=60 - i)).isoformat())
            for i in range(40)]
    store.insert_columns("traces", TraceColumns().extend(decode_trace(json.dumps(d).encode()).trace
                                                          for d in docs).columns)
    judge = OneHangingCall(hanging="bf-00")  # the oldest trace: the first page's first call
    judge.expected = len(docs) - 1
    scorer = LiveScorer(store, judge, ScoreSampler(salt="bf", rate=1.0), max_in_flight=4)
    result: dict = {}
    worker = threading.Thread(target=lambda: result.update(r=backfill(
        scorer, store, now - timedelta(hours=2), now + timedelta(minutes=1), page_size=10)), daemon=True)
    worker.start()
    try:
        others = judge.others_done.wait(60)  # a bound against a deadlock, not a timing: the other 39 need no wait
        seen = sorted(judge.judged)
    finally:
        judge.release.set()
    worker.join(60)
    assert others, f"the backfill waited for the hanging call: while it hung, judged only {seen}"
    assert result["r"].scored == 40 and len(decisions(store)) == 40
    assert {r["trace_id"] for r in rows(store)} == {d["trace_id"] for d in docs}
