"""Golden file loading: content hash ignores formatting, every problem is listed (capped), envelopes checked."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ragmon.errors import InputError
from ragmon.golden_files import MAX_PROBLEMS, load_golden

CASE = {"id": "c1", "question": "q", "category": "s", "expected_behaviour": "answer",
        "reference_passages": [{"doc_id": "d", "chunk_ids": ["a"]}]}  # fmt: skip


def test_hash_ignores_key_order_and_whitespace_but_not_content(tmp_path: Path) -> None:
    a, b, c = tmp_path / "a.json", tmp_path / "b.json", tmp_path / "c.json"
    a.write_text(json.dumps([CASE]))
    b.write_text(json.dumps([dict(reversed(list(CASE.items())))], indent=4))
    c.write_text(json.dumps([{**CASE, "question": "q2"}]))
    ga, gb, gc = load_golden(a), load_golden(b), load_golden(c)
    assert ga.sha256 == gb.sha256 != gc.sha256
    assert ga.version == f"sha256:{ga.sha256[:12]}" and ga.set_name is None and ga.name == "a"


def test_envelope(tmp_path: Path) -> None:
    path = tmp_path / "g.json"
    path.write_text(json.dumps({"name": "support", "version": "7", "set": "release", "cases": [CASE]}))
    golden = load_golden(path)
    assert (golden.name, golden.version, golden.set_name, len(golden.cases)) == ("support", "7", "release", 1)
    path.write_text(json.dumps({"version": "", "set": "prod", "cases": [CASE]}))
    with pytest.raises(InputError) as info:
        load_golden(path)
    assert ("version: must be a non-empty string" in str(info.value)
            and "set: must be one of dev, release" in str(info.value))


def test_every_bad_case_is_named_and_the_list_is_capped(tmp_path: Path) -> None:
    bad = [{**CASE, "id": f"bad-{i}", "category": ""} for i in range(30)]
    path = tmp_path / "g.json"
    path.write_text(json.dumps(bad))
    with pytest.raises(InputError) as info:
        load_golden(path)
    message = str(info.value)
    assert "30 problem(s)" in message and "case 'bad-0' (#1): category:" in message
    assert f"… and {30 - MAX_PROBLEMS} more" in message and "bad-29" not in message


def test_missing_file_and_directory(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no such golden file"):
        load_golden(tmp_path / "nope.json")
    with pytest.raises(InputError, match="is a directory"):
        load_golden(tmp_path)


def test_hostile_nesting_is_an_input_error(tmp_path: Path) -> None:
    path = tmp_path / "deep.json"
    path.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(InputError, match="nested too deeply"):
        load_golden(path)


def test_an_answerable_case_whose_every_chunk_is_graded_0_is_refused(tmp_path: Path) -> None:
    # it could never fail the gate: with nothing relevant to find, recall, MRR and nDCG are undefined
    path = tmp_path / "g.json"
    passage = {"doc_id": "d", "chunk_ids": ["a", "b"], "grades": {"a": 0, "b": 0}}
    path.write_text(json.dumps([{**CASE, "reference_passages": [passage]}]))
    with pytest.raises(InputError) as info:
        load_golden(path)
    assert "case 'c1' (#1)" in str(info.value) and "grade 1 or more" in str(info.value)
    passage["grades"]["b"] = 1
    path.write_text(json.dumps([{**CASE, "reference_passages": [passage]}]))
    assert load_golden(path).cases[0].relevant_chunks() == {"b"}
