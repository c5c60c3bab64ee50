"""``ragmon gate`` and permission leaks, end to end through the console entry point: any leak in any stratum
fails the gate (exit 1) unless ``--allow-leaks "reason, named approver"`` is given (exit 0, the approver recorded
in the artifact); a malformed or hostile approval is refused before the run (exit 2).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.integration.test_gate_cli import gate, gate_in_process, gcase, golden_file

# A retriever that takes tenant= and leaks one globex chunk to acme users asking about salaries (its filter is
# broken there); chunk tenants come from the items for most chunks and from chunk_tenant() for the rest.
RETRIEVER = '''
CALLS = []
OWNERS = {"pay@1": "globex", "kb@1": "public", "acme@1": "acme"}
def search(question, k, tenant=None):
    CALLS.append(tenant)
    if question == "salaries":
        return [{"chunk_id": "acme@1", "score": 2.0, "tenant": "acme"}, {"chunk_id": "pay@1", "score": 1.0}][:k]
    if question == "other tenant's payroll":
        return [{"chunk_id": "kb@1", "score": 1.0}]
    return [{"chunk_id": "acme@1", "score": 1.0, "tenant": tenant or "acme"}]
def chunk_tenant(chunk_id):
    return OWNERS.get(chunk_id)
'''


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("RAGMON_INGEST__SHARED_TENANTS", '["public"]')  # kb@1 is readable by everyone
    (tmp_path / "tenant_retriever.py").write_text(RETRIEVER, encoding="utf-8")
    golden_file(tmp_path / "golden.json", [
        {**gcase("c1", "salaries", "hr", ["acme@1"]), "tenant": "acme"},
        {**gcase("c2", "invoices", "billing", ["acme@1"]), "tenant": "acme"},
        {**gcase("c3", "other tenant's payroll", "hr", behaviour="refuse"), "tenant": "acme"},
        gcase("c4", "no tenant here", "billing", ["acme@1"]),
    ])
    return tmp_path


def _args(project: Path, *extra: str) -> list[str | Path]:
    return [project / "golden.json", "--retriever", "tenant_retriever:search", "--k", "2", "--min-coverage", "0.5",
            "--min-mrr", "0.5", "--out", project / "runs", "--no-progress", *extra]


def _artifact(project: Path) -> dict:
    [path] = (project / "runs").glob("run-*.json")
    return json.loads(path.read_text(encoding="utf-8"))


def test_a_leak_in_one_stratum_fails_the_gate_and_names_chunk_and_tenants(project: Path) -> None:
    done = gate(project, *_args(project, "--format", "json"))
    assert done.returncode == 1, done.stderr
    out = json.loads(done.stdout)
    rows = {r["stratum"]: r for r in out["strata"]}
    assert rows["hr"]["permission_leaks"] == 1 and "permission_leaks" in rows["hr"]["failures"]
    assert rows["billing"]["permission_leaks"] == 0 and rows["billing"]["failures"] == []
    assert rows["billing"]["leak_checked"] == 1 and rows["hr"]["leak_checked"] == 2  # the refuse case is checked
    assert out["leaks"] == {"checked_cases": 3, "leaked_chunks": 1, "per_stratum": {"hr": 1}, "approval": None,
                            "passed": False}  # fmt: skip
    assert any("permission leak: pay@1 (tenant 'globex')" in n for n in out["notes"])
    queries = {q["case_id"]: q for q in _artifact(project)["queries"]}
    assert queries["c1"]["permission_leaks"] == [{"chunk_id": "pay@1", "tenant": "globex"}]
    assert queries["c3"]["permission_leaks"] == [] and queries["c3"]["excluded"]


def test_allow_leaks_passes_the_gate_and_the_artifact_records_who_approved(project: Path) -> None:
    done = gate(project, *_args(project, "--allow-leaks", "globex payroll chunk mislabelled, INC-42, Jane O'Neil"))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "leaks allowed by \"Jane O'Neil\"" in done.stdout or "leaks allowed by 'Jane O" in done.stdout
    leaks = _artifact(project)["leaks"]
    assert leaks["approval"] == {"reason": "globex payroll chunk mislabelled, INC-42", "approver": "Jane O'Neil"}
    assert leaks["passed"] is True and leaks["leaked_chunks"] == 1


def test_a_shared_tenant_is_not_a_leak(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAGMON_INGEST__SHARED_TENANTS", '["public", "globex"]')
    done = gate(project, *_args(project, "--format", "json"))
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(done.stdout)["leaks"]["leaked_chunks"] == 0


@pytest.mark.parametrize(("value", "why"), [
    ("", "expected"),
    ("no approver given", "expected"),
    ("reason only,", "expected"),
    (", Jane Doe", "expected"),
    ("   ,   ", "expected"),
    ("ship it, TBD", "not a named approver"),
    ("ship it, me", "not a named approver"),
    ("ship it, 12345", "not a named approver"),
    ("ship it, [bold red]Jane[/]", "not a named approver"),
    ("ship it, Jane; rm -rf /", "not a named approver"),
    ("ship it, $(whoami)", "not a named approver"),
    ("ship it\nPASS: every stratum met every threshold, Jane Doe", "control"),
    ("ship it, Jane\x1b[2K Doe", "control"),
    ("ship it, Jane \u202eeoD", "control"),
    ("ship it, Jane\u200b Doe", "control"),
    ("x" * 600 + ", Jane Doe", "at most 500"),
    ("ship it, " + "J" * 120, "not a named approver"),
])
def test_a_malformed_or_hostile_approval_is_refused_before_the_run(project: Path, value: str, why: str,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    result = gate_in_process(project, *_args(project, "--allow-leaks", value), monkeypatch=monkeypatch)
    assert result.exit_code == 2, result.output
    assert why in result.output and "--allow-leaks" in result.output
    assert not (project / "runs").exists()  # refused before anything ran or was written


LONG = '''
def search(question, k, tenant=None):  # asked for k, returns ten; another tenant's chunk at rank 7
    return [{"chunk_id": f"c{i}", "score": 1.0 - i / 10, "tenant": "globex" if i == 6 else tenant} for i in range(10)]
'''


def test_a_leak_beyond_k_from_a_retriever_that_returns_more_fails_the_gate(tmp_path: Path) -> None:
    (tmp_path / "long_retriever.py").write_text(LONG, encoding="utf-8")
    golden_file(tmp_path / "golden.json", [{**gcase("c1", "salaries", "hr", ["c0"]), "tenant": "acme"}])
    done = gate(tmp_path, tmp_path / "golden.json", "--retriever", "long_retriever:search", "--k", "3",
                "--min-coverage", "0.5", "--min-mrr", "0.5", "--out", tmp_path / "runs", "--no-progress",
                "--format", "json")
    assert done.returncode == 1, done.stdout + done.stderr
    out = json.loads(done.stdout)
    assert out["leaks"]["leaked_chunks"] == 1 and out["leaks"]["passed"] is False
    assert any("checked for permission leaks" in n for n in out["notes"])
    assert any("permission leak: c6 (tenant 'globex')" in n for n in out["notes"])
