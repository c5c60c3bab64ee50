"""The gate's leak check in the runner: who is called with tenant=, where chunk tenants come from, which cases
are checked, and how a failing tenant lookup is recorded."""

from __future__ import annotations

from typing import Any

import pytest

from ragmon.contracts.golden import GoldenCase
from ragmon.gate.leaks import LeakCheck, parse_approval
from ragmon.gate.report import Thresholds, build_result
from ragmon.gate.runner import RetrieverOutputError, normalise_ranking, run_case
from ragmon.metrics.permissions import LeakedChunk, LeakRule


def case(tenant: str = "acme", behaviour: str = "answer") -> GoldenCase:
    passages = [{"doc_id": "d", "chunk_ids": ["a"]}] if behaviour == "answer" else []
    return GoldenCase.model_validate({"id": "c", "question": "q", "category": "s", "expected_behaviour": behaviour,
                                      "reference_passages": passages, "tenant": tenant})  # fmt: skip


def test_tenant_is_passed_only_to_a_retriever_that_takes_it() -> None:
    seen: list[Any] = []

    def scoped(question: str, k: int, *, tenant: str | None = None) -> list[str]:
        seen.append(tenant)
        return ["a"]

    def plain(question: str, k: int) -> list[str]:
        seen.append("plain")
        return ["a"]

    rule = LeakRule()
    for f in (scoped, plain):
        run = run_case(case(), f, 1, 1, leak_check=LeakCheck.for_retriever(f, None, rule))
        assert run.leak_checked and run.leaks == ()
    assert seen == ["acme", "plain"]
    assert not LeakCheck.for_retriever(len, None, rule).passes_tenant  # no signature: called plainly


def test_tenants_from_items_then_chunk_tenant_and_a_refuse_case_is_checked_but_not_scored() -> None:
    module = type("M", (), {"chunk_tenant": staticmethod(lambda c: {"b": "globex", "c": "public"}.get(c))})
    check = LeakCheck.for_retriever(lambda q, k: None, module, LeakRule.sharing(["public"]))  # type: ignore[arg-type]
    out = [{"chunk_id": "a", "tenant": "initech"}, {"chunk_id": "b"}, {"chunk_id": "c"}, {"chunk_id": "d"}]
    run = run_case(case(behaviour="refuse"), lambda q, k: out, 4, 4, leak_check=check)
    assert run.excluded and run.leak_checked and run.metrics is None
    assert run.leaks == (LeakedChunk("a", "initech"), LeakedChunk("b", "globex"))
    report = build_result([run], Thresholds(0.5, 0.5), 4, 4)
    assert report.rows[-1].permission_leaks == 2 and "permission_leaks" in report.rows[-1].failures
    allowed = build_result([run], Thresholds(0.5, 0.5, leaks_allowed=True), 4, 4)
    assert allowed.passed and allowed.rows[-1].permission_leaks == 2


def test_a_case_without_tenant_is_not_checked_and_a_refuse_case_without_tenant_not_called() -> None:
    def boom(q: str, k: int) -> list[str]:
        raise AssertionError("must not be called")

    check = LeakCheck.for_retriever(boom, None, LeakRule())
    assert run_case(case(tenant="", behaviour="refuse"), boom, 1, 1, leak_check=check).leak_checked is False
    report = build_result([run_case(case(tenant=""), lambda q, k: ["a"], 1, 1, leak_check=check)], Thresholds(0.5, 0.5), 1, 1)
    assert report.rows[-1].permission_leaks is None and report.passed  # nothing checked: '—', not 0


def test_a_failing_or_lying_tenant_lookup_is_an_error_for_the_case() -> None:
    for lookup, why in ((lambda c: 1 / 0, "ZeroDivisionError"), (lambda c: 42, "returned int")):
        module = type("M", (), {"chunk_tenant": staticmethod(lookup)})
        check = LeakCheck.for_retriever(lambda q, k: None, module, LeakRule())  # type: ignore[arg-type]
        run = run_case(case(), lambda q, k: ["a"], 1, 1, leak_check=check)
        assert run.error and why in run.error and not run.leak_checked


@pytest.mark.parametrize("tenant", [3, ["acme"], "t" * 300])
def test_a_returned_tenant_that_is_not_a_short_string_is_garbage(tenant: Any) -> None:
    with pytest.raises(RetrieverOutputError, match="tenant"):
        normalise_ranking([{"chunk_id": "a", "tenant": tenant}], 3)


def test_the_approval_splits_at_the_last_comma_and_normalises_spaces() -> None:
    approval = parse_approval("  shared glossary,  mislabelled ,   Zoë  Åström-Li ")
    assert approval.as_dict() == {"reason": "shared glossary, mislabelled", "approver": "Zoë Åström-Li"}
    assert parse_approval("ok, jane.doe@example.com").approver == "jane.doe@example.com"


def _returns_more(question: str, k: int, *, tenant: str | None = None) -> list[dict[str, Any]]:
    """Asked for k, returns ten: the other tenant's chunk sits at rank 7, past k."""
    return [{"chunk_id": f"a{i}", "score": 1.0 - i / 10, "tenant": "globex" if i == 6 else "acme"} for i in range(10)]


def test_a_leak_past_k_in_a_ranking_longer_than_asked_is_a_leak() -> None:
    """Leaks are judged on the ranking before truncation: the extra results are cut for scoring, not for the
    permission check (docs/leaks.md, rule 4)."""
    rule = LeakRule()
    run = run_case(case(), _returns_more, 3, 5, leak_check=LeakCheck.for_retriever(_returns_more, None, rule))
    assert run.returned_more and run.ranking == ("a0", "a1", "a2", "a3", "a4")  # scored on what was asked for
    assert run.leaks == (LeakedChunk("a6", "globex"),)
    result = build_result([run], Thresholds(0.0, 0.0), 3, 5)
    assert not result.passed and "permission_leaks" in result.rows[-1].failures


def test_a_refuse_case_past_k_is_checked_too_and_an_endless_ranking_is_bounded() -> None:
    import itertools

    rule = LeakRule()
    run = run_case(case(behaviour="refuse"), _returns_more, 3, 3,
                   leak_check=LeakCheck.for_retriever(_returns_more, None, rule))
    assert run.excluded and run.leak_checked and run.leaks == (LeakedChunk("a6", "globex"),)

    def endless(question: str, k: int) -> Any:
        return ({"chunk_id": f"e{i}", "tenant": "acme"} for i in itertools.count())

    bounded = run_case(case(), endless, 3, 3, leak_check=LeakCheck.for_retriever(endless, None, rule))
    assert bounded.returned_more and bounded.error is None and bounded.leaks == ()
