"""Gate internals: retriever output normalisation (hostile values), per-case runs with an injected clock, the
per-stratum report and thresholds, and the per-query comparison."""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ragmon.contracts.golden import GoldenCase
from ragmon.gate.compare import GoldenMismatchError, check_same_golden
from ragmon.gate.report import (
    ALL,
    Thresholds,
    build_result,
    render_markdown,
    small_strata_notes,
    wilson_interval,
)
from ragmon.gate.runner import RetrieverOutputError, normalise_output, run_case, run_gate_cases


def case(case_id: str, category: str = "s", chunks: tuple[str, ...] = ("a",), behaviour: str = "answer") -> GoldenCase:
    passages = [{"doc_id": "d", "chunk_ids": list(chunks)}] if chunks else []
    return GoldenCase.model_validate({"id": case_id, "question": f"q {case_id}", "category": category,
                                      "expected_behaviour": behaviour, "reference_passages": passages})  # fmt: skip


def test_accepted_shapes() -> None:
    assert normalise_output(["a", "b"], 5) == (("a", "b"), None, False)
    assert normalise_output([("a", 2), ("b", 1.5)], 5) == (("a", "b"), (2.0, 1.5), False)
    assert normalise_output(({"chunk_id": "a", "score": 1}, {"chunk_id": "b", "score": 0}), 5)[1] == (1.0, 0.0)
    assert normalise_output(iter(["a", "b", "c"]), 2) == (("a", "b"), None, True)
    assert normalise_output(itertools.repeat("x"), 3) == (("x", "x", "x"), None, True)  # endless: read k + 1
    assert normalise_output([], 3) == ((), None, False)
    assert normalise_output([("a", np.float32(0.5)), ("b", np.int64(0))], 3)[1] == (0.5, 0.0)  # FAISS-style scores


@pytest.mark.parametrize(
    "value",
    [None, 42, "a,b", b"ab", {"a": 1}, [1, 2], [("a",)], [("a", float("nan"))], [("a", "high")],
     [("a", np.float32("inf"))], [""], [7], [("a", 1.0), "b"], [["a", True]], ["x" * 300]],
)  # fmt: skip
def test_garbage_is_rejected_with_a_reason(value: Any) -> None:
    with pytest.raises(RetrieverOutputError):
        normalise_output(value, 5)


@given(st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
                    lambda inner: st.lists(inner, max_size=4) | st.tuples(inner, inner)
                    | st.dictionaries(st.text(max_size=8), inner, max_size=3), max_leaves=12))  # fmt: skip
def test_any_value_is_either_a_ranking_or_a_retriever_output_error(value: Any) -> None:
    try:
        ids, scores, _ = normalise_output(value, 4)
    except RetrieverOutputError:
        return
    assert all(isinstance(i, str) and i for i in ids) and len(ids) <= 4
    assert scores is None or all(math.isfinite(s) for s in scores)


def test_run_case_times_with_injected_clock_and_survives_errors() -> None:
    ticks = iter([10.0, 10.25])
    run = run_case(case("c1", chunks=("a", "b")), lambda q, k: ["b", "x"], k=1, depth=2, clock=lambda: next(ticks))
    assert run.latency_ms == 250.0 and run.ranking == ("b", "x")
    assert run.metrics is not None and run.metrics.recall_at_k == 0.5

    def boom(question: str, k: int) -> list[str]:
        raise SystemExit(3)  # even sys.exit inside user code is one case's error, not the gate's end

    failed = run_case(case("c2"), boom, k=1, depth=1)
    assert failed.error == "SystemExit: 3" and failed.metrics is not None and failed.metrics.recall_at_k == 0.0
    excluded = run_case(case("c3", chunks=(), behaviour="refuse"), boom, k=1, depth=1)
    assert excluded.excluded and excluded.error is None and excluded.metrics is None


def test_report_gates_every_stratum_and_all() -> None:
    cases = [case("g1", "good"), case("g2", "good"), case("b1", "bad", ("zz",)), case("r", "refusals", (), "refuse")]
    runs = run_gate_cases(cases, lambda q, k: ["a"], k=1, depth=1)
    result = build_result(runs, Thresholds(min_coverage=0.6, min_mrr=0.5), k=1, depth=1)
    rows = {r.stratum: r for r in result.rows}
    assert [r.stratum for r in result.rows] == ["bad", "good", "refusals", ALL]
    assert rows["bad"].failures == ("coverage_at_k", "mrr_at_k")
    assert rows["good"].failures == () and rows["refusals"].failures == () and rows["refusals"].n_excluded == 1
    assert rows[ALL].coverage_at_k == pytest.approx(2 / 3) and rows[ALL].failures == ()
    assert not result.passed
    assert "| bad | 1 | 0 | 0 | 0.000 **FAIL** |" in render_markdown(result)
    assert build_result(runs, Thresholds(min_coverage=0.0, min_mrr=0.0), k=1, depth=1).passed


def test_latency_threshold_is_a_maximum() -> None:
    ticks = itertools.count(step=0.5)  # every call takes 500 ms
    runs = run_gate_cases([case("c1"), case("c2")], lambda q, k: ["a"], k=1, depth=1, clock=lambda: next(ticks))
    slow = build_result(runs, Thresholds(0.0, 0.0, max_p95_ms=400), k=1, depth=1)
    assert slow.rows[-1].latency_p95_ms == pytest.approx(500.0) and "latency_p95_ms" in slow.rows[-1].failures
    assert build_result(runs, Thresholds(0.0, 0.0, max_p95_ms=600), k=1, depth=1).passed


def test_tiny_strata_carry_an_interval_and_a_minimum_cases_rule() -> None:
    """1 of 2 cases found: the verdict shows its interval; with --min-cases it is not gated on its own."""
    cases = [case("t1", "tiny"), case("t2", "tiny", ("zz",))] + [case(f"b{i}", "big") for i in range(6)]
    runs = run_gate_cases(cases, lambda q, k: ["a"], k=1, depth=1)
    gated = build_result(runs, Thresholds(min_coverage=0.7, min_mrr=0.6), k=1, depth=1)
    tiny = {r.stratum: r for r in gated.rows}["tiny"]
    assert tiny.failures == ("coverage_at_k", "mrr_at_k") and not gated.passed
    low, high = tiny.coverage_ci
    assert (low, high) == (pytest.approx(0.0945, abs=1e-3), pytest.approx(0.9055, abs=1e-3))  # Wilson, 1 of 2
    [note] = small_strata_notes(gated)
    assert note.startswith("tiny: FAIL on 2 case(s)") and "95% CI [0.09, 0.91]" in note
    lenient = build_result(runs, Thresholds(min_coverage=0.7, min_mrr=0.6, min_cases=3), k=1, depth=1)
    rows = {r.stratum: r for r in lenient.rows}
    assert rows["tiny"].failures == () and rows["tiny"].too_few == ("coverage_at_k", "mrr_at_k")
    assert lenient.passed and "too few" in render_markdown(lenient)
    assert rows[ALL].n_scored == 8  # its cases still count in ALL
    assert {r.stratum: r for r in build_result(
        runs, Thresholds(0.7, 0.6, min_cases=2), k=1, depth=1).rows}["tiny"].failures  # 2 ≥ 2: gated
    assert wilson_interval(1.0, 1)[1] == 1.0 and wilson_interval(0.0, 1)[0] == 0.0
    assert Thresholds(0.5, 0.5, min_cases=0).problems() == ["--min-cases must be at least 1, got 0"]


def test_threshold_problems() -> None:
    assert Thresholds(0.5, 0.5).problems() == []
    assert len(Thresholds(1.5, -0.1, float("nan"), 0).problems()) == 4


def test_golden_mismatch_is_refused_unless_allowed() -> None:
    base = {"golden": {"version": "v1", "sha256": "aa", "set": "dev"}}
    assert check_same_golden({"version": "v1", "sha256": "aa", "set": "dev"}, base, False) is False
    with pytest.raises(GoldenMismatchError, match="version 'v1' \\(baseline\\) vs 'v2'"):
        check_same_golden({"version": "v2", "sha256": "bb", "set": "dev"}, base, False)
    with pytest.raises(GoldenMismatchError, match="set 'dev' \\(baseline\\) vs 'release'"):
        check_same_golden({"version": "v1", "sha256": "aa", "set": "release"}, base, False)
    assert check_same_golden({"version": "v2", "sha256": "bb", "set": "dev"}, base, True) is True


def test_wilson_interval_of_one_in_two_and_of_no_cases():
    # 1 of 2: the documented [0.09, 0.91]; 0 cases: no interval, never a division by zero
    low, high = wilson_interval(0.5, 2)
    assert (round(low, 2), round(high, 2)) == (0.09, 0.91)
    assert all(math.isnan(x) for x in wilson_interval(0.0, 0))
