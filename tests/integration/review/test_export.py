"""Golden-set export against chDB: valid golden-case.v1 cases with the adjudication filled in, disagreement kept,
unexportable items reported, existing cases untouched; and the `ragmon review` CLI end to end (in-process)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import jsonschema
import pytest
from typer.testing import CliRunner

from ragmon.cli.app import app as cli
from ragmon.contracts.golden import GoldenSet
from ragmon.errors import InputError
from ragmon.review.export import case_id, export_golden
from ragmon.review.labels import Label, save_label
from ragmon.review.selection import select_week
from tests.integration.review.support import insert_traces, week_traces

SCHEMA = json.loads((Path(__file__).resolve().parents[3] / "schemas" / "golden-case.v1.schema.json").read_text())
T0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


def label(week, trace_id, reviewer, **kw) -> Label:
    values = dict(answer_correct=True, grounded=True, citations_supported=True, refusal_appropriate=True,
                  expected_behaviour="answer", add_to_golden=True, note="", relevant_chunk_ids=("policy@c41",))
    values.update(kw)
    return Label(week, trace_id, reviewer, T0 + timedelta(minutes=len(reviewer)), **values)


@pytest.fixture
def labelled(store, review):
    week, traces = week_traces(6, ["consent"], seed=41)
    traces[1]["category"] = ""
    insert_traces(store, traces)
    select_week(review, week, 6, seed="exp", now=T0)
    t = [x["trace_id"] for x in traces]
    save_label(review, label(week, t[0], "alice", note="policy §4"))
    save_label(review, label(week, t[0], "bob", answer_correct=False, add_to_golden=False, note="too vague"))
    save_label(review, label(week, t[1], "alice", expected_behaviour="refuse", relevant_chunk_ids=(),
                            reference_answer="I can't help with that."))
    save_label(review, label(week, t[2], "alice", relevant_chunk_ids=()))  # answer without passages
    save_label(review, label(week, t[3], "alice"))
    save_label(review, label(week, t[3], "bob", expected_behaviour="refuse"))  # both want it, disagree
    save_label(review, label(week, t[4], "alice", add_to_golden=False))
    return week, traces


def test_export_writes_valid_cases_with_adjudication(store, labelled, tmp_path, review):
    week, traces = labelled
    out = tmp_path / "golden.json"
    result = export_golden(review, out)
    ids = [case_id(week, t["trace_id"]) for t in traces]
    assert sorted(result.added) == sorted([ids[0], ids[1]])
    assert set(result.skipped) == {ids[2], ids[3]}
    assert "tick the chunks" in result.skipped[ids[2]] and "disagree" in result.skipped[ids[3]]
    data = json.loads(out.read_text())
    for case in data:
        jsonschema.validate(case, SCHEMA)
    cases = {c.id: c for c in GoldenSet.validate_python(data)}
    first = cases[ids[0]]
    assert first.question == traces[0]["question"] and first.expected_behaviour == "answer"
    assert first.adjudication.reviewers == ["alice", "bob"] and first.adjudication.agreed is False
    assert "alice: policy §4" in first.adjudication.note and "answer_correct" in first.adjudication.note
    assert first.reference_passages[0].chunk_ids == ["policy@c41"]
    assert first.reference_passages[0].doc_id == "policy" and first.corpus_snapshot == "2026-11-01"
    assert first.reference_answer == traces[0]["answer"] and first.added == T0.date()
    refusal = cases[ids[1]]
    assert refusal.expected_behaviour == "refuse" and refusal.category == "uncategorized"
    assert refusal.adjudication.agreed is True and refusal.reference_answer == "I can't help with that."


def test_export_keeps_existing_cases_and_is_idempotent(store, labelled, tmp_path, review):
    out = tmp_path / "golden.json"
    export_golden(review, out)
    edited = json.loads(out.read_text())
    edited[0]["reference_answer"] = "edited by hand"
    out.write_text(json.dumps(edited))
    again = export_golden(review, out)
    assert again.added == () and len(again.already_present) == 2
    assert json.loads(out.read_text())[0]["reference_answer"] == "edited by hand"
    out.write_text('[{"id": "x"}]')
    with pytest.raises(InputError, match="not a valid golden set"):
        export_golden(review, out)


def test_cli_select_status_export(store, store_settings, tmp_path, monkeypatch):
    week, traces = week_traces(30, ["a", "b"], seed=43)
    insert_traces(store, traces)
    monkeypatch.setenv("RAGMON_STORE__DSN", store_settings.dsn.get_secret_value())
    monkeypatch.setenv("RAGMON_STORE__DATABASE", store_settings.database)
    runner = CliRunner()
    r = runner.invoke(cli, ["review", "select", "--week", week, "--size", "8", "--stratify", "--min-per-stratum",
                            "2", "--seed", "cli-seed"])
    assert r.exit_code == 0, r.output
    assert "selected and queued: 8 traces, seed cli-seed" in r.output
    r = runner.invoke(cli, ["review", "select", "--week", week, "--size", "8"])
    assert r.exit_code == 0 and "already selected" in r.output
    r = runner.invoke(cli, ["review", "select", "--week", week, "--dry-run"])
    assert r.exit_code == 0 and "seed cli-seed" in r.output
    r = runner.invoke(cli, ["review", "status", "--week", week])
    assert r.exit_code == 0 and "items" in r.output
    r = runner.invoke(cli, ["review", "select", "--week", "2026-W99"])
    assert r.exit_code != 0
    from ragmon.review.selection import iso_week

    r = runner.invoke(cli, ["review", "select", "--week", iso_week(datetime.now(UTC))])
    assert r.exit_code == 2 and "has not ended yet" in " ".join(r.output.split())
    r = runner.invoke(cli, ["review", "export", "--golden", str(tmp_path / "g.json")])
    assert r.exit_code == 0 and "0 cases added" in r.output
    assert json.loads((tmp_path / "g.json").read_text()) == []
    r = runner.invoke(cli, ["review", "hash-password", "--stdin"], input="a long password\n")
    assert r.exit_code == 0 and r.output.startswith("scrypt$")
    r = runner.invoke(cli, ["review", "hash-password", "--stdin"], input=b"\xff\xfe not text\n")
    assert r.exit_code == 2 and "not UTF-8 text" in r.output
