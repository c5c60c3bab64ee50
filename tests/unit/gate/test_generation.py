"""Gate generation internals: answerer output normalisation (hostile values, Hypothesis), one case through
answerer and heuristic judge with an injected clock, the trace it builds, and the per-stratum generation report."""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from datetime import UTC, datetime
from types import ModuleType
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ragmon.contracts.golden import GoldenCase
from ragmon.contracts.trace import Trace
from ragmon.errors import InputError, JudgeError
from ragmon.gate.answerer import AnswererOutputError, Passage, chunk_text_function, normalise_answer
from ragmon.gate.generation import GenerationRun, GenerationSetup, generate_case, trace_id
from ragmon.gate.generation_report import (
    GenerationThresholds,
    build_generation_result,
    render_generation_markdown,
)
from ragmon.gate.report import ALL
from ragmon.gate.runner import run_case
from ragmon.judge import HeuristicJudge
from ragmon.judge.scoring import score_trace

GIVEN = ("c1", "c2")
TEXTS = {"c1": "Refunds are paid within ten business days.", "c2": "Parking is free on weekends."}


def case(case_id: str = "q1", behaviour: str = "answer", chunks: tuple[str, ...] = ("c1",)) -> GoldenCase:
    passages = [{"doc_id": "d", "chunk_ids": list(chunks)}] if behaviour == "answer" else []
    return GoldenCase.model_validate({"id": case_id, "question": "how fast are refunds paid", "category": "s",
                                      "expected_behaviour": behaviour, "reference_passages": passages})  # fmt: skip


@dataclass
class Reply:
    answer: str
    citations: list[dict[str, Any]]


def test_accepted_answer_shapes() -> None:
    assert normalise_answer("Plain text.", GIVEN).citations == () and normalise_answer("x", GIVEN).context == GIVEN
    out = normalise_answer({"answer": "A.", "citations": [{"sentence": 0, "chunk_id": "c1", "quote": "q"}],
                            "behaviour": "answer", "context": ["c2", "c2"]}, GIVEN)  # fmt: skip
    assert out.citations == ({"sentence": 0, "chunk_id": "c1", "quote": "q"},) and out.context == ("c2",)
    assert normalise_answer(Reply("A.", [{"sentence": 0, "chunk_id": "c1"}]), GIVEN).citations[0]["quote"] is None
    assert normalise_answer({"answer": "", "behaviour": "route"}, GIVEN).behaviour == "route"
    assert normalise_answer({"answer": "A.", "citations": iter([])}, ()).context == ()


@pytest.mark.parametrize(
    ("value", "reason"),
    [(None, "returned NoneType"), (42, "returned int"), (["a"], "returned list"), (b"x", "returned bytes"),
     ({"answer": 1}, "'answer' must be a string"), ({"text": "x"}, "unknown keys ['text']"),
     ({"answer": "x", "behaviour": "shrug"}, "'behaviour' must be one of"),
     ({"answer": "x", "citations": "c1"}, "citations is str"),
     ({"answer": "x", "citations": [{"sentence": True, "chunk_id": "c1"}]}, "citations[0].sentence"),
     ({"answer": "x", "citations": [{"sentence": -1, "chunk_id": "c1"}]}, "citations[0].sentence"),
     ({"answer": "x", "citations": [{"sentence": 0, "chunk_id": ""}]}, "citations[0].chunk_id"),
     ({"answer": "x", "citations": [{"sentence": 0, "chunk_id": "c1", "quote": 3}]}, "citations[0].quote"),
     ({"answer": "x", "citations": [{"sentence": 0, "chunk_id": "c1", "page": 3}]}, "unknown keys ['page']"),
     ({"answer": "x", "citations": ["c1"]}, "citations[0] is str"),
     ({"answer": "x", "citations": itertools.repeat({"sentence": 0, "chunk_id": "c1"})}, "more than 1000"),
     ({"answer": "x", "context": ["c9"]}, "names chunks it was not given"),
     ({"answer": "x", "context": [None]}, "names chunks it was not given"), (object(), "'answer' must be a string")],
)  # fmt: skip
def test_garbage_answers_are_rejected_with_a_reason(value: Any, reason: str) -> None:
    with pytest.raises(AnswererOutputError, match=None) as caught:
        normalise_answer(value, GIVEN)
    assert reason in str(caught.value)


json_like = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
        st.sampled_from(["answer", "citations", "behaviour", "context", "sentence", "chunk_id", "quote", "x"]),
        inner, max_size=4),
    max_leaves=10,
)  # fmt: skip


@given(json_like)
def test_any_value_is_either_an_answer_or_an_answerer_output_error(value: Any) -> None:
    try:
        out = normalise_answer(value, GIVEN)
    except AnswererOutputError:
        return
    assert isinstance(out.answer, str) and out.behaviour in ("answer", "refuse", "clarify", "route")
    assert set(out.context) <= set(GIVEN)
    assert all(isinstance(c["sentence"], int) and c["sentence"] >= 0 and c["chunk_id"] for c in out.citations)


def test_chunk_text_function_is_required_with_a_message_saying_how() -> None:
    module = ModuleType("r")
    with pytest.raises(InputError, match=r"no callable chunk_text\(chunk_id\)"):
        chunk_text_function(module, "r:search")
    module.chunk_text = TEXTS.get  # type: ignore[attr-defined]
    assert chunk_text_function(module, "r:search")("c1") == TEXTS["c1"]


def setup_for(answerer: Any, retriever: Any = None, judge: Any = None, chunk_text: Any = TEXTS.get) -> GenerationSetup:
    return GenerationSetup(retriever=retriever or (lambda q, k: [("c1", 2.0), ("c2", 0.5)]), answerer=answerer,
                           chunk_text=chunk_text, judge=judge or HeuristicJudge(), k=2, depth=3,
                           retriever_name="r:search", corpus_snapshot="snap-1", now=datetime.now(UTC))  # fmt: skip


def cited(question: str, chunks: list[Passage]) -> dict[str, Any]:
    cid, text = chunks[0]
    sentence = text.split(".")[0] + "."
    return {"answer": sentence, "citations": [{"sentence": 0, "chunk_id": cid, "quote": sentence}]}


def test_one_case_answered_traced_and_scored_like_the_live_scorer() -> None:
    ticks = iter([1.0, 1.5])
    seen: list[list[Passage]] = []
    setup = setup_for(lambda q, chunks: seen.append(chunks) or cited(q, chunks))
    retrieval = run_case(case(), setup.retriever, k=2, depth=3, clock=lambda: 0.0)
    out = generate_case(case(), retrieval, setup, clock=lambda: next(ticks))
    assert out.error is None and out.generate_ms == 500.0 and out.outcome == "correct_answer"
    assert seen == [[Passage("c1", TEXTS["c1"]), Passage("c2", TEXTS["c2"])]]  # top k, with texts, best first
    trace = out.trace
    assert trace is not None and Trace.model_validate(trace).corpus_snapshot == "snap-1"
    assert (trace["trace_id"] == "gate:q1" and trace["query_id"] == "q1"
            and trace["context"]["chunk_ids"] == ["c1", "c2"])
    assert ([r["rank"] for r in trace["retrieved"]] == [1, 2]
            and trace["attributes"]["ragmon.gate.retriever_scores"] == "returned")
    live = score_trace(setup.judge, trace)
    assert {v.metric: v.value for v in live.values} == out.values and out.values["faithfulness"] == 1.0


def test_excluded_cases_are_retrieved_for_the_answerer_and_a_wrong_refusal_is_joined_to_its_retrieval() -> None:
    calls: list[str] = []
    setup = setup_for(lambda q, c: {"answer": "I cannot answer.", "behaviour": "refuse"},
                      retriever=lambda q, k: calls.append(q) or ["c2"])  # fmt: skip
    refuse_case = case("r1", behaviour="refuse")
    excluded = run_case(refuse_case, setup.retriever, k=2, depth=3)
    assert excluded.excluded and calls == []  # the retrieval run does not call it...
    out = generate_case(refuse_case, excluded, setup)
    assert calls == [refuse_case.question] and out.outcome == "correct_decline"  # ...generation does
    assert out.trace is not None and out.trace["attributes"]["ragmon.gate.retriever_scores"] == "none"
    answerable = case("a1")
    wrong = generate_case(answerable, run_case(answerable, setup.retriever, k=2, depth=3), setup)
    assert wrong.outcome == "wrong_refusal" and wrong.refusal_cause == "irrelevant_shortlist"  # c1 was never retrieved


class BrokenJudge(HeuristicJudge):
    def assess(self, item: Any) -> Any:
        raise JudgeError("endpoint said 401: check judge.api_key")


@pytest.mark.parametrize(
    ("setup", "expected"),
    [
        (setup_for(lambda q, c: 1 / 0), "answerer: ZeroDivisionError: division by zero"),
        (setup_for(lambda q, c: {"answer": "x", "context": ["zz"]}), "answerer returned garbage: 'context' names"),
        (setup_for(lambda q, c: {"answer": "x" * 200_001}), "does not fit trace.v1: answer:"),
        (setup_for(cited, chunk_text=lambda cid: None), "chunk_text('c1') returned NoneType"),
        (setup_for(cited, chunk_text=lambda cid: 1 / 0), "chunk_text: ZeroDivisionError"),
        (setup_for(cited, judge=BrokenJudge()), "judge failed: endpoint said 401"),
        (setup_for(lambda q, c: exit(3)), "answerer: SystemExit: 3"),
    ],
)
def test_a_failing_case_is_recorded_not_raised(setup: GenerationSetup, expected: str) -> None:
    out = generate_case(case(), run_case(case(), setup.retriever, k=2, depth=3), setup)
    assert out.error is not None and expected in out.error and out.values == {} and out.outcome is None


def test_a_failed_retrieval_is_not_answered() -> None:
    def boom(q: str, k: int) -> Any:
        raise RuntimeError("shard down")

    answered: list[str] = []
    setup = setup_for(lambda q, c: answered.append(q), retriever=boom)
    out = generate_case(case(), run_case(case(), boom, k=2, depth=3), setup)
    assert out.error is not None and "retrieval failed" in out.error and "shard down" in out.error and not answered
    refusal = generate_case(case("r", "refuse"), run_case(case("r", "refuse"), boom, k=2, depth=3), setup)
    assert refusal.error == "retriever: RuntimeError: shard down"


def test_long_case_ids_get_a_hashed_trace_id() -> None:
    assert trace_id("x" * 256).startswith("gate:sha256:") and len(trace_id("x" * 256)) <= 256


def run(category: str, outcome: str | None, error: str | None = None, **values: float | None) -> GenerationRun:
    return GenerationRun(case_id="c", category=category, expected_behaviour="answer", outcome=outcome, error=error,
                         values=dict(values), generate_ms=10.0)  # fmt: skip


def test_report_rates_thresholds_and_errors_per_stratum() -> None:
    runs = [
        run("a", "correct_answer", faithfulness=1.0, citation_precision=1.0),
        run("a", "wrong_refusal", faithfulness=None),
        run("a", "correct_decline"),
        run("b", "correct_answer", faithfulness=0.2, citation_precision=None),
        run("b", "missed_refusal", faithfulness=0.4),
        run("b", None, error="answerer: boom"),
    ]
    ungated = build_generation_result(runs, GenerationThresholds(), "heuristic", "", "fp")
    assert ungated.passed  # errors alone do not fail a gate with no generation threshold
    t = GenerationThresholds(min_faithfulness=0.5, max_wrong_refusal_rate=0.4, max_missed_refusal_rate=0.0)
    result = build_generation_result(runs, t, "heuristic", "", "fp")
    rows = {r.stratum: r for r in result.rows}
    a, b, total = rows["a"], rows["b"], rows[ALL]
    assert a.faithfulness == 1.0 and (a.wrong_refusals, a.should_answer, a.wrong_refusal_rate) == (1, 2, 0.5)
    assert a.missed_refusal_rate == 0.0 and a.failures == ("wrong_refusal_rate",)
    assert b.faithfulness == pytest.approx(0.3) and b.citation_precision is None and b.n_errors == 1
    assert b.failures == ("faithfulness", "missed_refusal_rate", "generation_errors")
    assert total.n_cases == 6 and total.faithfulness == pytest.approx(1.6 / 3)
    assert math.isclose(total.wrong_refusal_rate or 0, 1 / 3) and not result.passed
    assert result.as_dict()["judge"] == {"name": "heuristic", "model": "", "fingerprint": "fp"}
    markdown = render_generation_markdown(result)
    assert "| b | 2 | 1 **FAIL** | 0.300 **FAIL** |" in markdown and "| a |" in markdown


@pytest.mark.parametrize("value", [-0.1, 1.5, float("nan"), float("inf")])
def test_threshold_bounds(value: float) -> None:
    assert GenerationThresholds(max_missed_refusal_rate=value).problems()
    assert not GenerationThresholds(min_faithfulness=0.0, max_wrong_refusal_rate=1.0).problems()


class CountingBrokenJudge(BrokenJudge):
    calls = 0

    def assess(self, item: Any) -> Any:
        CountingBrokenJudge.calls += 1
        return super().assess(item)


def test_a_judge_that_keeps_failing_stops_being_called() -> None:
    from ragmon.gate.generation import JUDGE_FAILURES_TO_STOP, generate_cases

    cases = [case(f"q{i}") for i in range(6)]
    setup = setup_for(cited, judge=CountingBrokenJudge())
    runs = [run_case(c, setup.retriever, k=2, depth=3) for c in cases]
    out = generate_cases(cases, runs, setup)
    assert CountingBrokenJudge.calls == JUDGE_FAILURES_TO_STOP and all(r.judge_failed for r in out)
    assert out[-1].error == out[3].error == ("not judged: the judge failed on 3 cases in a row (last: judge failed: "
                                             "endpoint said 401: check judge.api_key)")  # fmt: skip
    # answerer failures are the system's, not the judge's: they never stop the run
    flaky = generate_cases(cases, runs, setup_for(lambda q, c: 1 / 0))
    assert all(r.error and r.error.startswith("answerer:") and not r.judge_failed for r in flaky)


class SlowJudge(HeuristicJudge):
    """The heuristic judge in threads, each call waiting until ``width`` calls run at once (a barrier)."""

    io_bound = True

    def __init__(self, width: int):
        super().__init__()
        import threading

        self.barrier = threading.Barrier(width, timeout=30)

    def assess(self, item: Any) -> Any:
        self.barrier.wait()  # breaks (BrokenBarrierError) unless ``width`` calls are in flight together
        return super().assess(item)


def test_cases_are_judged_concurrently_and_reported_in_case_order() -> None:
    from ragmon.gate.generation import generate_cases

    cases = [case(f"q{i}") for i in range(12)]
    seen: list[str] = []
    setup = setup_for(cited, judge=SlowJudge(width=4))
    runs = [run_case(c, setup.retriever, k=2, depth=3) for c in cases]
    out = generate_cases(cases, runs, setup, max_in_flight=4, on_case=lambda r: seen.append(r.case_id))
    assert [r.case_id for r in out] == seen == [c.id for c in cases]
    assert all(r.error is None for r in out)
    one_at_a_time = generate_cases(cases, runs, setup_for(cited))
    assert [r.values for r in out] == [r.values for r in one_at_a_time]


def test_a_failing_judge_stops_at_the_same_case_with_calls_in_flight() -> None:
    from ragmon.gate.generation import generate_cases

    class ThreadedBrokenJudge(CountingBrokenJudge):
        io_bound = True

    cases = [case(f"q{i}") for i in range(20)]
    setup = setup_for(cited, judge=ThreadedBrokenJudge())
    runs = [run_case(c, setup.retriever, k=2, depth=3) for c in cases]
    CountingBrokenJudge.calls = 0
    out = generate_cases(cases, runs, setup, max_in_flight=4)
    sequential = generate_cases(cases, runs, setup_for(cited, judge=CountingBrokenJudge()))
    assert [(r.case_id, r.error) for r in out] == [(r.case_id, r.error) for r in sequential]
    assert CountingBrokenJudge.calls <= 3 + 3 + 2 * 4  # the sequential run's 3, plus at most a window ahead
