"""``ragmon gate --answerer`` end to end: the console script in a subprocess, real files, a real retriever module
with ``chunk_text``, a real answerer module, the heuristic judge (and the OpenAI judge against a local server).

Covers: per-stratum generation metrics in the table, the JSON and the artifact with the judge fingerprint; a
generation threshold failing in one stratum only (exit 1); an answerer that raises or returns garbage on one
case; wrong and missed refusals counted against the golden expected_behaviour; the gate's per-case values equal
what the live scorer's path (trace.v1 decoder → ``score_trace`` with the judge from the same settings) gives
for the same trace; the example answerer in one command; usage errors.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ragmon.config import load_settings
from ragmon.contracts.decode import DecodedTrace, decode_trace
from ragmon.judge import make_judge
from ragmon.judge.scoring import score_trace
from tests.integration.test_gate_cli import REPO, gate, gate_in_process, gcase, golden_file

# One module is the system under test: a fixed retriever with chunk texts, and an answerer scripted per question.
SYSTEM = '''
TEXTS = {
    "sky": "The sky is blue on a clear day. At sunset it turns orange.",
    "inv": "Invoices are sent on the first business day of each month.",
    "war": "The warranty lasts two years from the delivery date.",
    "off": "The office is in Lisbon, next to the river.",
    "noise": "Parking is free for visitors on weekends.",
}
TABLE = {
    "what colour is the sky": [("sky", 3.0), ("noise", 0.5)],
    "when are invoices sent": [("inv", 2.5), ("noise", 0.4)],
    "how long is the warranty": [("war", 2.0)],
    "where is the office": [("off", 2.2), ("noise", 0.3)],
    "tell me a secret": [("noise", 0.2)],
    "should refuse this": [("noise", 0.1)],
    "route me to a human": [("noise", 0.1)],
    "answerer explodes": [("sky", 1.0)],
    "answerer garbage": [("sky", 1.0)],
    "answerer bad citation": [("sky", 1.0)],
}
ANSWERS = {
    "what colour is the sky": ("The sky is blue on a clear day.", "sky"),
    "when are invoices sent": ("Invoices are sent on the first business day of each month.", "inv"),
    "how long is the warranty": ("The warranty lasts ten years and covers accidental damage by astronauts.", "war"),
    "tell me a secret": ("The vault code is hidden behind the painting in the lobby.", "noise"),
}
SEEN = {}

def search(question, k):
    return TABLE.get(question, [])[:k]

def chunk_text(chunk_id):
    return TEXTS.get(chunk_id)

def answer(question, chunks):
    SEEN[question] = list(chunks)
    if question == "answerer explodes":
        raise RuntimeError("generator overloaded")
    if question == "answerer garbage":
        return 42
    if question == "answerer bad citation":
        return {"answer": "The sky is blue.", "citations": [{"sentence": -1, "chunk_id": "sky", "quote": "x"}]}
    if question == "route me to a human":
        return {"answer": "Transferring.", "behaviour": "route"}
    if question in ANSWERS:
        text, cited = ANSWERS[question]
        assert [c[0] for c in chunks][:1] == [TABLE[question][0][0]] and all(isinstance(c[1], str) for c in chunks)
        return {"answer": text, "citations": [{"sentence": 0, "chunk_id": cited, "quote": text}], "context": [cited]}
    return {"answer": "I cannot answer that from the documents.", "behaviour": "refuse", "citations": []}
'''

CASES = [
    gcase("g1", "what colour is the sky", "good", ["sky"]),
    gcase("g2", "when are invoices sent", "good", ["inv"]),
    gcase("g3", "should refuse this", "good", behaviour="refuse"),  # refused: a correct decline
    gcase("g4", "route me to a human", "good", behaviour="route"),  # routed: a correct decline
    gcase("b1", "how long is the warranty", "bad", ["war"]),  # answered with an invented claim and a false quote
    gcase("b2", "where is the office", "bad", ["off"]),  # refused with the evidence in hand: a wrong refusal
    gcase("b3", "tell me a secret", "bad", behaviour="refuse"),  # answered: a missed refusal
]
RETRIEVAL = ("--retriever", "system:search", "--k", "2", "--min-coverage", "0.5", "--min-mrr", "0.5")
ANSWERER = ("--answerer", "system:answer")


@pytest.fixture
def system(tmp_path: Path) -> Path:
    (tmp_path / "system.py").write_text(SYSTEM, encoding="utf-8")
    return tmp_path


def run_json(cwd: Path, golden: Path, *args: str | Path) -> tuple[int, dict[str, Any], str]:
    done = gate(cwd, golden, *RETRIEVAL, *ANSWERER, "--out", cwd / "runs", "--format", "json", "--no-progress", *args)
    assert done.stdout, done.stderr
    return done.returncode, json.loads(done.stdout), done.stderr


def rows_of(payload: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["stratum"]: r for r in payload["generation"]["strata"]}


def test_generation_metrics_per_stratum_with_the_judge_fingerprint(system: Path) -> None:
    golden = golden_file(system / "g.json", CASES)
    code, payload, _ = run_json(system, golden)
    assert code == 0  # no generation threshold given: reported, not gated
    heuristic = make_judge(load_settings(None).judge)
    assert payload["generation"]["judge"] == {"name": "heuristic", "model": "", "fingerprint": heuristic.fingerprint}
    rows = rows_of(payload)
    assert [r for r in rows] == ["bad", "good", "ALL"]
    good, bad, total = rows["good"], rows["bad"], rows["ALL"]
    assert good["faithfulness"] == 1.0 and good["citation_precision"] == 1.0 and good["citation_recall"] == 1.0
    # b1: the invented sentence is unsupported and its quote is not in the chunk; b3's answer is unsupported too
    assert bad["faithfulness"] == 0.0 and bad["citation_precision"] == 0.0
    assert total["faithfulness"] == pytest.approx(0.5) and total["n_cases"] == 7 and total["n_errors"] == 0
    assert good["answer_relevance"] > bad["answer_relevance"]
    # the retrieval report is unchanged by --answerer: refusal cases are still excluded from it
    assert {r["stratum"]: r["n_excluded"] for r in payload["strata"]} == {"bad": 1, "good": 2, "ALL": 3}

    artifact = json.loads(Path(payload["artifact"]).read_text())
    assert artifact["generation"]["judge"]["fingerprint"] == heuristic.fingerprint
    assert artifact["generation"]["report"] == payload["generation"]
    assert artifact["parameters"] == {"retriever": "system:search", "k": 2, "depth": 2, "answerer": "system:answer",
                                      "judge": "heuristic"}  # fmt: skip
    queries = {q["case_id"]: q for q in artifact["queries"]}
    g1 = queries["g1"]["generation"]
    assert g1["refusal_outcome"] == "correct_answer" and g1["live_scores"]["faithfulness"] == 1.0
    trace = g1["trace"]
    assert trace["context"]["chunk_ids"] == ["sky"] and [r["text"] for r in trace["retrieved"]][0].startswith("The sky")
    assert trace["retrieved"][0]["score"] == 3.0 and trace["latency_ms"]["generate"] >= 0
    # cases excluded from retrieval scoring were retrieved for the answerer, and stay excluded
    assert (queries["b3"]["excluded"] is True
            and queries["b3"]["generation"]["trace"]["retrieved"][0]["chunk_id"] == "noise")

    table = gate(system, golden, *RETRIEVAL, *ANSWERER, "--out", system / "runs")
    assert table.returncode == 0, table.stderr
    assert f"generation: heuristic judge, fingerprint {heuristic.fingerprint}" in table.stdout
    assert f"judge: heuristic, fingerprint {heuristic.fingerprint}" in table.stdout
    lines = {ln.split("│")[1].strip(): ln
             for ln in table.stdout.split("generation:")[1].splitlines() if ln.count("│") > 5}
    assert "1/2 0.500" in lines["bad"] and "1/1 1.000" in lines["bad"]  # wrong refusals, missed refusals
    markdown = gate(system, golden, *RETRIEVAL, *ANSWERER, "--out", system / "runs", "--format", "markdown")
    assert "Generation: heuristic judge" in markdown.stdout and "| bad | 3 | 0 | 0.000 |" in markdown.stdout


def test_wrong_and_missed_refusals_counted_against_the_golden_expectation(system: Path) -> None:
    code, payload, _ = run_json(system, golden_file(system / "g.json", CASES))
    rows = rows_of(payload)
    bad, good, total = rows["bad"], rows["good"], rows["ALL"]
    assert (bad["wrong_refusals"], bad["should_answer"], bad["wrong_refusal_rate"]) == (1, 2, 0.5)
    assert (bad["missed_refusals"], bad["should_decline"], bad["missed_refusal_rate"]) == (1, 1, 1.0)
    assert (good["wrong_refusals"], good["missed_refusals"], good["should_decline"]) == (0, 0, 2)
    assert good["wrong_declines"] == 0  # g4 routed as expected; refusing it would have been a wrong decline
    assert (total["wrong_refusals"], total["missed_refusals"]) == (1, 1)
    queries = {q["case_id"]: q["generation"] for q in json.loads(Path(payload["artifact"]).read_text())["queries"]}
    assert queries["b2"]["refusal_outcome"] == "wrong_refusal" and queries["b2"]["refusal_cause"] == "with_evidence"
    assert queries["b3"]["refusal_outcome"] == "missed_refusal"
    assert queries["g3"]["refusal_outcome"] == queries["g4"]["refusal_outcome"] == "correct_decline"


def test_a_generation_threshold_failing_in_one_stratum_only_exits_1(system: Path) -> None:
    golden = golden_file(system / "g.json", CASES)
    code, payload, _ = run_json(system, golden, "--min-faithfulness", "0.4", "--max-missed-refusal-rate", "0.5")
    assert code == 1
    rows = rows_of(payload)
    assert rows["bad"]["failures"] == ["faithfulness", "missed_refusal_rate"]
    assert rows["good"]["failures"] == [] and rows["ALL"]["failures"] == []  # ALL 0.5 ≥ 0.4, missed 1/3
    assert payload["passed"] is False and payload["generation"]["passed"] is False
    assert all(not r["failures"] for r in payload["strata"])  # retrieval passed: generation alone failed the gate
    table = gate(system, golden, *RETRIEVAL, *ANSWERER, "--min-faithfulness", "0.4", "--out", system / "runs")
    assert table.returncode == 1 and "FAIL: bad (faithfulness)" in table.stdout
    passing = gate(system, golden, *RETRIEVAL, *ANSWERER, "--min-faithfulness", "0.0",
                   "--max-wrong-refusal-rate", "0.5", "--out", system / "runs")  # fmt: skip
    assert passing.returncode == 0 and "PASS: every stratum met every threshold" in passing.stdout


def test_an_answerer_that_raises_or_returns_garbage_is_reported_for_that_case(system: Path) -> None:
    cases = [*CASES[:2], gcase("x1", "answerer explodes", "flaky", ["sky"]),
             gcase("x2", "answerer garbage", "flaky", ["sky"]), gcase("x3", "answerer bad citation", "flaky", ["sky"]),
             gcase("x4", "what colour is the sky", "flaky", ["sky"])]  # fmt: skip
    golden = golden_file(system / "g.json", cases)
    code, payload, _ = run_json(system, golden)
    assert code == 0
    flaky = rows_of(payload)["flaky"]
    assert (flaky["n_cases"], flaky["n_scored"], flaky["n_errors"]) == (4, 1, 3) and flaky["faithfulness"] == 1.0
    notes = "\n".join(payload["notes"])
    assert "'x1': generation: answerer: RuntimeError: generator overloaded" in notes
    assert "'x2': generation: answerer returned garbage: returned int" in notes
    assert "'x3': generation: answerer returned garbage: citations[0].sentence must be" in notes
    queries = {q["case_id"]: q["generation"] for q in json.loads(Path(payload["artifact"]).read_text())["queries"]}
    assert queries["x1"]["trace"] is None and queries["x1"]["live_scores"] == {} and queries["x4"]["error"] is None
    # gated on generation, an unmeasured case cannot let its stratum pass
    gated, payload, _ = run_json(system, golden, "--min-faithfulness", "0.5")
    assert gated == 1 and rows_of(payload)["flaky"]["failures"] == ["generation_errors"]
    assert rows_of(payload)["good"]["failures"] == []


def test_the_gate_scores_exactly_what_the_live_scorer_path_scores(system: Path) -> None:
    """Shared code and fingerprint: each trace the gate built, decoded by the live decoder and scored with
    ``score_trace`` and the judge ``make_judge(settings.judge)`` builds, gives the gate's values."""
    code, payload, _ = run_json(system, golden_file(system / "g.json", CASES))
    artifact = json.loads(Path(payload["artifact"]).read_text())
    live_judge = make_judge(load_settings(None).judge)
    assert artifact["generation"]["judge"]["fingerprint"] == live_judge.fingerprint
    compared = 0
    for query in artifact["queries"]:
        generated = query["generation"]
        decoded = decode_trace(json.dumps(generated["trace"]).encode())
        assert isinstance(decoded, DecodedTrace), decoded  # a valid trace.v1 message, as ingest would accept it
        live = score_trace(live_judge, decoded.trace)
        assert live.judge_fingerprint == artifact["generation"]["judge"]["fingerprint"]
        assert {v.metric: v.value for v in live.values} == generated["live_scores"]
        compared += 1
    assert compared == len(CASES)
    faithfulness = {q["case_id"]: q["generation"]["live_scores"]["faithfulness"] for q in artifact["queries"]}
    assert faithfulness["g1"] == 1.0 and faithfulness["b1"] == 0.0  # not trivially equal: both values occur


def test_example_answerer_in_one_command(tmp_path: Path) -> None:
    done = gate(tmp_path, REPO / "examples/golden/dev.json", "--retriever", f"{REPO / 'examples/retriever.py'}:search",
                "--k", "3", "--min-coverage", "0.5", "--min-mrr", "0.5", "--answerer",
                f"{REPO / 'examples/answerer.py'}:answer", "--max-wrong-refusal-rate", "0.3", "--out", tmp_path,
                "--format", "json")  # fmt: skip
    payload = json.loads(done.stdout)
    rows = rows_of(payload)
    assert rows["ALL"]["n_cases"] == 21 and rows["ALL"]["n_errors"] == 0
    assert rows["out-of-scope"]["missed_refusals"] == 0 and rows["out-of-scope"]["should_decline"] == 2
    assert rows["ALL"]["faithfulness"] == 1.0  # extractive: every answer is a sentence of its cited chunk
    # ALL's wrong-refusal rate passes while shipping's does not: the case for gating every stratum
    assert rows["ALL"]["failures"] == [] and "wrong_refusal_rate" in rows["shipping"]["failures"]
    assert done.returncode == 1


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--min-faithfulness", "0.5"], "need --answerer"),
        (["--judge", "heuristic"], "need --answerer"),
        ([*ANSWERER, "--min-faithfulness", "1.5"], "--min-faithfulness must be between 0 and 1"),
        (["--answerer", "system:nope"], "--answerer 'system:nope': system has no attribute 'nope'"),
        (["--answerer", "nocolon"], "--answerer 'nocolon': expected module:function"),
    ],
)
def test_usage_errors_exit_2(system: Path, args: list[str], expected: str, monkeypatch: pytest.MonkeyPatch) -> None:
    golden = golden_file(system / "g.json", CASES)
    done = gate_in_process(system, golden, *RETRIEVAL, *args, "--out", system / "runs", monkeypatch=monkeypatch)
    assert done.exit_code == 2 and expected in done.stderr, done.output
    assert not (system / "runs").exists()


def test_retriever_module_without_chunk_text_is_a_usage_error(system: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (system / "bare.py").write_text("def search(q, k):\n    return ['a']\n", encoding="utf-8")
    golden = golden_file(system / "g.json", CASES)
    done = gate_in_process(system, golden, "--retriever", "bare:search", "--k", "2", "--min-coverage", "0.1",
                           "--min-mrr", "0.1", *ANSWERER, monkeypatch=monkeypatch)  # fmt: skip
    assert done.exit_code == 2 and "has no callable chunk_text(chunk_id)" in done.stderr, done.output


def test_openai_judge_through_the_gate_is_the_live_scorers_judge(system: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """--judge openai against a local OpenAI-compatible server (real socket, real protocol, a 429 first): the
    gate records that judge's fingerprint, and the live path with the same settings gives the same values."""
    from tests.integration.test_openai_judge import good
    from tests.support.openai_server import FakeOpenAI, ok, status

    quotes = {"sky": "The sky is blue on a clear day", "inv": "Invoices are sent on the first business day",
              "noise": "Parking is free for visitors"}  # fmt: skip

    def responder(request: dict[str, Any]) -> Any:  # a scripted model: supports with a real quote, except warranty
        prompt = json.dumps(request["messages"])
        chunk = next(cid for cid, quote in quotes.items() if quote in prompt or cid == "noise")
        claim = {"claim": "the answer", "supported": "no" if "warranty" in prompt else "yes",
                 "evidence": [{"chunk_id": chunk, "quote": quotes[chunk]}]}  # fmt: skip
        return ok(good(claims=[claim], chunks=[], citations=[]), prompt_tokens=1000, completion_tokens=100)

    with FakeOpenAI([status(429, "slow down", headers={"Retry-After": "0"})], responder=responder) as srv:
        env = {"RAGMON_JUDGE__BASE_URL": srv.base_url, "RAGMON_JUDGE__API_KEY": "sk-gate-secret",
               "RAGMON_JUDGE__MODEL": "judge-model", "RAGMON_JUDGE__BACKOFF_INITIAL_SECONDS": "0.01",
               "RAGMON_JUDGE__INPUT_USD_PER_MILLION_TOKENS": "1"}  # fmt: skip
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        golden = golden_file(system / "g.json", CASES)
        code, payload, stderr = run_json(system, golden, "--judge", "openai")
        assert code == 0, stderr
        settings = load_settings(None).judge
        live_judge = make_judge(settings.model_copy(update={"kind": "openai"}))  # as `ragmon score --judge openai`
        assert live_judge.name == "openai"
        judge = payload["generation"]["judge"]
        assert judge == {"name": "openai", "model": "judge-model", "fingerprint": live_judge.fingerprint}
        assert judge["fingerprint"] != make_judge(settings).fingerprint  # the heuristic judge's differs
        artifact = json.loads(Path(payload["artifact"]).read_text())
        for query in artifact["queries"]:
            decoded = decode_trace(json.dumps(query["generation"]["trace"]).encode())
            assert isinstance(decoded, DecodedTrace), decoded
            live = score_trace(live_judge, decoded.trace)
            assert {v.metric: v.value for v in live.values} == query["generation"]["live_scores"]
        assert len(srv.requests) == 2 * len(CASES) + 1  # the gate's calls (one retried 429), then the live ones
        assert all(h == "Bearer sk-gate-secret" for h in srv.auth_headers)
        table = gate(system, golden, *RETRIEVAL, *ANSWERER, "--judge", "openai", "--out", system / "runs")
    rows = rows_of(payload)
    # the scripted model supports every claim with a real quote except the warranty one (b1): bad = 2/3
    assert rows["bad"]["faithfulness"] == pytest.approx(2 / 3) and rows["good"]["faithfulness"] == 1.0
    assert "sk-gate-secret" not in table.stdout + table.stderr + Path(payload["artifact"]).read_text()
    assert f"judge: openai, model judge-model, fingerprint {judge['fingerprint']}" in table.stdout
    assert "cost $0.0070" in table.stdout  # 7 judgements × 1,000 prompt tokens at $1 per million


def test_without_answerer_the_gate_is_the_retrieval_gate(system: Path) -> None:
    golden = golden_file(system / "g.json", CASES)
    done = gate(system, golden, *RETRIEVAL, "--out", system / "runs", "--format", "json")
    assert done.returncode == 0, done.stderr
    payload = json.loads(done.stdout)
    assert "generation" not in payload and payload["passed"] is True
    artifact = json.loads(Path(payload["artifact"]).read_text())
    assert "generation" not in artifact and all("generation" not in q for q in artifact["queries"])
    assert artifact["parameters"] == {"retriever": "system:search", "k": 2, "depth": 2}
    table = gate(system, golden, *RETRIEVAL, "--out", system / "runs")
    assert "generation:" not in table.stdout and "judge" not in table.stdout
