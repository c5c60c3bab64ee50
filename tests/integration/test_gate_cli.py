"""``ragmon gate`` end to end: the real console entry point in a subprocess, real files, real retrievers.

Covers: pass; fail in one stratum only; malformed golden files; a retriever that raises or returns garbage on
one case; --compare with the same golden set and with a different version (refused unless allowed).
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
# the installed console script, as a user runs it (its sys.path does not hold the working directory)
RAGMON = [shutil.which("ragmon")] if shutil.which("ragmon") else [sys.executable, "-c",
                                                                  "from ragmon.cli.app import main; main()"]
EXAMPLE_RETRIEVER = f"{REPO / 'examples' / 'retriever.py'}:search"

# A retriever under test control: answers from a fixed table keyed by question; some questions misbehave.
FIXED_RETRIEVER = '''
TABLE = {
    "good one": ["a1", "x", "a2"],
    "good two": ["b1"],
    "bad one": ["x", "y", "z", "c1"],
    "bad two": ["x", "y"],
    "slow": ["d1"],
}
def search(question, k):
    if question == "explodes":
        raise RuntimeError("index shard 3 unavailable")
    if question == "garbage":
        return 42
    if question == "bad items":
        return [("ok", 1.0), (None, 2.0)]
    return [(c, 1.0 / (i + 1)) for i, c in enumerate(TABLE.get(question, []))][:k]
'''


def gcase(case_id: str, question: str, category: str, chunks: list[str] | None = None, behaviour: str = "answer",
          grades: dict[str, int] | None = None) -> dict[str, Any]:  # fmt: skip
    case: dict[str, Any] = {"id": case_id, "question": question, "category": category, "expected_behaviour": behaviour}
    if chunks:
        passage: dict[str, Any] = {"doc_id": "doc", "chunk_ids": chunks}
        if grades:
            passage["grades"] = grades
        case["reference_passages"] = [passage]
    return case


def golden_file(path: Path, cases: list[dict[str, Any]], version: str = "v1", set_name: str = "dev") -> Path:
    path.write_text(json.dumps({"name": "t", "version": version, "set": set_name, "cases": cases}), encoding="utf-8")
    return path


def gate(cwd: Path, *args: str | Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1"}
    return subprocess.run(
        [*RAGMON, "gate", *map(str, args)],
        cwd=cwd, capture_output=True, text=True, timeout=120, env=env, check=False,
    )  # fmt: skip


def gate_in_process(cwd: Path, *args: str | Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The same command through typer's CliRunner: for the many error paths, without a process start each."""
    from typer.testing import CliRunner

    from ragmon.cli.app import app

    monkeypatch.chdir(cwd)
    monkeypatch.setattr(sys, "path", list(sys.path))  # the gate puts the working directory on the path
    return CliRunner().invoke(app, ["gate", *map(str, args)])


@pytest.fixture
def fixed(tmp_path: Path) -> str:
    (tmp_path / "fixed_retriever.py").write_text(FIXED_RETRIEVER, encoding="utf-8")
    return "fixed_retriever:search"  # importable because the working directory is on the path


THRESHOLDS = ("--min-coverage", "0.5", "--min-mrr", "0.5")


def test_example_set_passes_and_writes_an_immutable_artifact(tmp_path: Path) -> None:
    out = tmp_path / "runs"
    done = gate(tmp_path, REPO / "examples/golden/dev.json", "--retriever", EXAMPLE_RETRIEVER, "--k", "3",
                "--depth", "8", *THRESHOLDS, "--out", out, "--format", "json")  # fmt: skip
    assert done.returncode == 0, done.stderr
    payload = json.loads(done.stdout)
    assert payload["passed"] is True
    rows = {r["stratum"]: r for r in payload["strata"]}
    assert rows["ALL"]["n_excluded"] == 3 and rows["out-of-scope"]["n_scored"] == 0
    assert rows["ALL"]["recall_at_depth"] >= rows["ALL"]["coverage_at_k"]
    path = Path(payload["artifact"])
    assert path.parent == out and path.name.startswith("run-")
    assert not path.stat().st_mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH)
    artifact = json.loads(path.read_text())
    assert artifact["golden"]["set"] == "dev" and artifact["golden"]["version"] == "2026-03-05.1"
    assert len(artifact["golden"]["sha256"]) == 64
    assert artifact["corpus_snapshots"] == {"golden": ["2026-03-01"], "retriever": "2026-03-01"}
    assert artifact["parameters"] == {"retriever": EXAMPLE_RETRIEVER, "k": 3, "depth": 8}
    assert "git_commit" in artifact["code"] and artifact["code"]["ragmon_version"]
    query = next(q for q in artifact["queries"] if q["case_id"] == "dev-priv-01")
    assert query["ranking"][0] == "privacy-consent@2026-03-01#c1" and query["latency_ms"] >= 0
    assert query["metrics"]["recall_at_k"] == 1.0
    assert next(q for q in artifact["queries"] if q["case_id"] == "dev-oos-01")["excluded"] is True


def test_artifact_records_git_revision_of_working_directory(tmp_path: Path) -> None:
    done = gate(REPO, "examples/golden/dev.json", "--retriever", "examples.retriever:search", "--k", "3",
                *THRESHOLDS, "--out", tmp_path, "--format", "json")  # fmt: skip
    assert done.returncode == 0, done.stderr
    code = json.loads(Path(json.loads(done.stdout)["artifact"]).read_text())["code"]
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True).stdout.strip()
    if head:
        assert code["git_commit"] == head and isinstance(code["git_dirty"], bool)
    else:  # an exported tree without .git: recorded as unknown, not invented
        assert code["git_commit"] is None and code["git_dirty"] is None


def test_fail_in_one_stratum_only(tmp_path: Path, fixed: str) -> None:
    cases = [
        gcase("g1", "good one", "good", ["a1", "a2"], grades={"a1": 3, "a2": 1}),
        gcase("g2", "good two", "good", ["b1"]),
        gcase("g3", "good one", "good", ["a1"]),
        gcase("g4", "good two", "good", ["b1"]),
        gcase("b1", "bad one", "bad", ["c1"]),
        gcase("b2", "bad two", "bad", ["c2"]),
        gcase("r1", "should refuse", "good", behaviour="refuse"),
    ]
    golden = golden_file(tmp_path / "g.json", cases)
    done = gate(tmp_path, golden, "--retriever", fixed, "--k", "3", "--depth", "4", "--min-coverage", "0.6",
                "--min-mrr", "0.5", "--out", tmp_path / "runs")  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    lines = {line.split("│")[1].strip(): line for line in done.stdout.splitlines() if line.count("│") > 5}
    assert "FAIL" in lines["bad"] and "FAIL" not in lines["good"] and "FAIL" not in lines["ALL"]
    assert "FAIL: bad (coverage_at_k, mrr_at_k)" in done.stdout
    # the same run as JSON: failures name the metrics, only for that stratum; recall@4 finds b1's chunk
    as_json = gate(tmp_path, golden, "--retriever", fixed, "--k", "3", "--depth", "4", "--min-coverage", "0.6",
                   "--min-mrr", "0.5", "--out", tmp_path / "runs", "--format", "json")  # fmt: skip
    rows = {r["stratum"]: r for r in json.loads(as_json.stdout)["strata"]}
    assert rows["bad"]["failures"] == ["coverage_at_k", "mrr_at_k"] and rows["good"]["failures"] == []
    assert rows["bad"]["coverage_at_k"] == 0.0 and rows["bad"]["recall_at_depth"] == 0.5
    assert rows["good"]["n_excluded"] == 1 and rows["ALL"]["failures"] == []


def test_optional_thresholds_gate_too(tmp_path: Path, fixed: str) -> None:
    golden = golden_file(tmp_path / "g.json", [gcase("g1", "good one", "s", ["a1", "a2"], grades={"a1": 1, "a2": 3})])
    done = gate(tmp_path, golden, "--retriever", fixed, "--k", "3", *THRESHOLDS, "--min-ndcg", "0.95",
                "--max-p95-ms", "60000", "--out", tmp_path, "--format", "markdown")  # fmt: skip
    assert done.returncode == 1
    assert "| s |" in done.stdout and "**FAIL**" in done.stdout  # nDCG < 0.95: a2 (grade 3) sits below a1


@pytest.mark.parametrize(
    ("cases", "expected"),
    [
        ([gcase("gs-1", "q", "c", ["a"]),
          {"id": "gs-2", "question": "q", "category": "c", "expected_behaviour": "answer",
          "reference_passages": [{"doc_id": "d", "chunk_ids": []}]}],
         ["case 'gs-2' (#2)", "reference_passages[0].chunk_ids"]),
        ([gcase("gs-7", "q", "c", ["a"], grades={"zz": 2})],
         ["case 'gs-7'", "grades name chunk ids not in chunk_ids: zz"]),
        ([{"id": "gs-3", "question": "q", "category": "c", "expected_behaviour": "maybe"}],
         ["case 'gs-3'", "expected_behaviour"]),
        ([gcase("gs-4", "q", "c")], ["case 'gs-4'", "needs at least one reference passage"]),
        ([gcase("gs-5", "q", "c", ["a"]), gcase("gs-5", "q", "c", ["b"])], ["case 'gs-5' (#2)", "duplicates case #1"]),
        ([{"question": "q", "category": "c", "expected_behaviour": "refuse", "colour": "red"}],
         ["case #1 (no id)", "id: Field required", "colour: Extra inputs are not permitted"]),
    ],
)  # fmt: skip
def test_malformed_golden_file_names_case_and_field(
    tmp_path: Path, fixed: str, cases: list[Any], expected: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    golden = golden_file(tmp_path / "bad.json", cases)
    done = gate_in_process(tmp_path, golden, "--retriever", fixed, "--k", "3", *THRESHOLDS, "--out",
                           tmp_path / "runs", monkeypatch=monkeypatch)  # fmt: skip
    assert done.exit_code == 2, done.output
    for text in expected:
        assert text in done.stderr
    assert done.exception is None or isinstance(done.exception, SystemExit)
    assert not (tmp_path / "runs").exists()


def test_malformed_golden_file_through_the_console_script(tmp_path: Path, fixed: str) -> None:
    bad = [gcase("gs-1", "q", "c", ["a"]), {**gcase("gs-2", "q", "c", ["a"]), "expected_behaviour": "maybe"}]
    done = gate(tmp_path, golden_file(tmp_path / "bad.json", bad), "--retriever", fixed, "--k", "3", *THRESHOLDS)
    assert done.returncode == 2 and "case 'gs-2' (#2): expected_behaviour:" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("content", "expected"),
    [("[{", "not valid JSON"), ("[]", "holds no cases"), ('{"cases": [], "sett": "dev"}', "unknown: ['sett']"),
     ('"just a string"', "must be a JSON array"), (b"\xff\xfe[]", "not UTF-8")],
)  # fmt: skip
def test_unreadable_golden_file(
    tmp_path: Path, fixed: str, content: str | bytes, expected: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "bad.json"
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    done = gate_in_process(tmp_path, path, "--retriever", fixed, "--k", "3", *THRESHOLDS, monkeypatch=monkeypatch)
    assert done.exit_code == 2 and expected in done.stderr, done.output


def test_retriever_that_raises_or_returns_garbage_on_one_case(tmp_path: Path, fixed: str) -> None:
    cases = [
        gcase("ok-1", "good one", "s", ["a1"]),
        gcase("boom", "explodes", "s", ["a1"]),
        gcase("junk", "garbage", "s", ["a1"]),
        gcase("junk-items", "bad items", "s", ["ok"]),
        gcase("ok-2", "good two", "s", ["b1"]),
    ]
    golden = golden_file(tmp_path / "g.json", cases)
    done = gate(tmp_path, golden, "--retriever", fixed, "--k", "3", "--min-coverage", "0.3", "--min-mrr", "0.3",
                "--out", tmp_path / "runs", "--format", "json")  # fmt: skip
    assert done.returncode == 0, done.stderr
    payload = json.loads(done.stdout)
    row = payload["strata"][-1]
    assert row["n_scored"] == 5 and row["n_errors"] == 3
    assert row["coverage_at_k"] == pytest.approx(2 / 5)  # errored cases count as retrieving nothing
    notes = "\n".join(payload["notes"])
    assert "'boom': RuntimeError: index shard 3 unavailable" in notes
    assert "'junk': retriever returned garbage: returned int" in notes
    assert "'junk-items': retriever returned garbage: item 1" in notes
    queries = {q["case_id"]: q for q in json.loads(Path(payload["artifact"]).read_text())["queries"]}
    assert queries["ok-2"]["ranking"] == ["b1"] and queries["ok-2"]["error"] is None
    assert queries["boom"]["error"].startswith("RuntimeError") and queries["boom"]["ranking"] == []


def test_compare_same_and_different_golden_versions(tmp_path: Path, fixed: str) -> None:
    cases = [gcase("c1", "good one", "s", ["a2"]), gcase("c2", "good two", "s", ["b1"]),
             gcase("c3", "bad two", "s", ["y"])]
    runs = tmp_path / "runs"
    base = gate(tmp_path, golden_file(tmp_path / "g.json", cases), "--retriever", fixed, "--k", "3", *THRESHOLDS,
                "--out", runs, "--format", "json")  # fmt: skip
    baseline = json.loads(base.stdout)["artifact"]
    # the candidate retriever: finds a2 first for c1 (gain), loses y for c3 (loss)
    (tmp_path / "candidate.py").write_text(
        "def search(q, k):\n    return {'good one': ['a2'], 'good two': ['b1'], 'bad two': ['x']}.get(q, [])\n"
    )
    same = gate(tmp_path, tmp_path / "g.json", "--retriever", "candidate:search", "--k", "3", *THRESHOLDS,
                "--out", runs, "--compare", baseline, "--format", "json")  # fmt: skip
    comparison = json.loads(same.stdout)["comparison"]
    assert [d["case_id"] for d in comparison["gains"]] == ["c1"]
    assert [d["case_id"] for d in comparison["losses"]] == ["c3"]
    assert comparison["unchanged"] == 1 and comparison["golden_differs"] is False
    assert comparison["losses"][0]["delta"]["recall_at_k"] == -1.0
    table = gate(tmp_path, tmp_path / "g.json", "--retriever", "candidate:search", "--k", "3", *THRESHOLDS,
                 "--out", runs, "--compare", baseline)  # fmt: skip
    assert "gain" in table.stdout and "c1" in table.stdout and "loss" in table.stdout

    v2 = golden_file(tmp_path / "g2.json", [*cases, gcase("c4", "good two", "s", ["b1"])], version="v2")
    refused = gate(tmp_path, v2, "--retriever", "candidate:search", "--k", "3", *THRESHOLDS, "--out", runs,
                   "--compare", baseline)  # fmt: skip
    assert refused.returncode == 2
    assert "refusing to compare runs over different golden sets: version 'v1' (baseline) vs 'v2'" in refused.stderr
    assert "--allow-different-golden" in refused.stderr
    # same version label, edited content: also refused
    edited = golden_file(tmp_path / "g3.json", cases[:2])
    sneaky = gate(tmp_path, edited, "--retriever", "candidate:search", "--k", "3", *THRESHOLDS, "--out", runs,
                  "--compare", baseline)  # fmt: skip
    assert sneaky.returncode == 2 and "different content" in sneaky.stderr
    allowed = gate(tmp_path, v2, "--retriever", "candidate:search", "--k", "3", *THRESHOLDS, "--out", runs,
                   "--compare", baseline, "--allow-different-golden", "--format", "json")  # fmt: skip
    assert allowed.returncode == 0, allowed.stderr
    comparison = json.loads(allowed.stdout)["comparison"]
    assert comparison["golden_differs"] is True and comparison["only_in_current"] == ["c4"]


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--k", "0", *THRESHOLDS], "--k must be a positive integer"),
        (["--k", "5", "--depth", "3", *THRESHOLDS], "--depth (3) must be at least --k (5)"),
        (["--k", "3", "--min-coverage", "0.5"], "--min-mrr"),  # thresholds have no defaults
        (["--k", "3", "--min-coverage", "1.5", "--min-mrr", "0.5"], "--min-coverage must be between 0 and 1"),
        (["--k", "3", *THRESHOLDS, "--set", "release"], "--set release but"),
    ],
)
def test_usage_errors_exit_2(
    tmp_path: Path, fixed: str, args: list[str], expected: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    golden = golden_file(tmp_path / "g.json", [gcase("c1", "good one", "s", ["a1"])])
    done = gate_in_process(tmp_path, golden, "--retriever", fixed, *args, monkeypatch=monkeypatch)
    assert done.exit_code == 2 and expected in done.stderr, done.output


@pytest.mark.parametrize(
    ("spec", "expected"),
    [("nocolon", "expected module:function"), ("no_such_module_xyz:f", "importing no_such_module_xyz failed"),
     ("fixed_retriever:nope", "has no attribute 'nope'"), ("missing.py:f", "no such file")],
)  # fmt: skip
def test_unloadable_retriever_exit_2(
    tmp_path: Path, fixed: str, spec: str, expected: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    golden = golden_file(tmp_path / "g.json", [gcase("c1", "good one", "s", ["a1"])])
    done = gate_in_process(tmp_path, golden, "--retriever", spec, "--k", "3", *THRESHOLDS, monkeypatch=monkeypatch)
    assert done.exit_code == 2 and expected in done.stderr, done.output


@pytest.mark.parametrize("body", ["raise SystemExit(0)", "import sys\nsys.exit()"])
def test_a_retriever_module_that_exits_at_import_fails_the_gate_not_passes_it(
    tmp_path: Path, fixed: str, body: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a script without an `if __name__ == "__main__"` guard: exit 0 would read as a passing gate in CI
    script = tmp_path / "script_retriever.py"
    script.write_text(body + "\n\ndef search(question, k):\n    return []\n")
    golden = golden_file(tmp_path / "g.json", [gcase("c1", "good one", "s", ["a1"])])
    done = gate_in_process(tmp_path, golden, "--retriever", f"{script}:search", "--k", "3", *THRESHOLDS,
                           monkeypatch=monkeypatch)
    assert done.exit_code == 2 and "importing" in done.stderr and "SystemExit" in done.stderr, done.output


def test_bare_array_needs_set_and_release_runs_are_counted(tmp_path: Path, fixed: str) -> None:
    golden = tmp_path / "bare.json"
    golden.write_text(json.dumps([gcase("c1", "good one", "s", ["a1"])]))
    missing = gate(tmp_path, golden, "--retriever", fixed, "--k", "3", *THRESHOLDS)
    assert missing.returncode == 2 and "pass --set dev or --set release" in missing.stderr
    runs = tmp_path / "runs"
    for _ in range(2):
        done = gate(tmp_path, golden, "--retriever", fixed, "--k", "3", *THRESHOLDS, "--set", "release", "--out", runs)
        assert done.returncode == 0, done.stderr
    assert "the release set has been run 1 time(s) before" in done.stdout
    assert "version sha256:" in done.stdout  # a bare array is versioned by its content hash
