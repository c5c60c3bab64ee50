"""The part files CHECK TABLE does not read, judged by their format (ragmon.store.part_files)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragmon.store.part_files import UNCHECKED, unchecked_files_problem

#: as the engine (chDB 4.4) writes them for a part of ``scores`` (columns_substreams.txt shortened to three columns)
WRITTEN = {
    "default_compression_codec.txt": b"CODEC(LZ4)",
    "metadata_version.txt": b"0",
    "columns_substreams.txt": b"columns substreams version: 1\n3 columns:\n2 substreams for column `trace_id`:\n"
                              b"\ttrace_id.size\n\ttrace_id\n1 substreams for column `ts`:\n\tts\n"
                              b"3 substreams for column `we\\`ird name`:\n\tx.dict_prefix\n\tx.dict\n\tx\n",
}


def part(tmp_path: Path, files: dict[str, bytes]) -> Path:
    where = tmp_path / "202612_2_2_1"
    where.mkdir(exist_ok=True)
    for name, raw in files.items():
        (where / name).write_bytes(raw)
    return where


def test_the_files_as_the_engine_writes_them_pass(tmp_path):
    assert unchecked_files_problem(part(tmp_path, WRITTEN)) is None
    (tmp_path / "none").mkdir()
    assert unchecked_files_problem(part(tmp_path / "none", {})) is None  # absent files are not judged


@pytest.mark.parametrize("name", ["default_compression_codec.txt", "columns_substreams.txt"])
def test_every_cut_of_a_file_is_found(tmp_path, name):
    full = WRITTEN[name]
    for size in range(len(full)):
        problem = unchecked_files_problem(part(tmp_path, {**WRITTEN, name: full[:size]}))
        assert problem is not None and problem.startswith(f"{name} ({size} bytes)"), (size, problem)


def test_an_empty_metadata_version_is_found_and_a_longer_one_passes(tmp_path):
    assert "metadata_version.txt (0 bytes): not a number" in unchecked_files_problem(
        part(tmp_path, {"metadata_version.txt": b""}))
    assert unchecked_files_problem(part(tmp_path, {"metadata_version.txt": b"12\n"})) is None


def test_a_projection_is_read_too_and_named(tmp_path):
    where = part(tmp_path, WRITTEN)
    (where / "by_day.proj").mkdir()
    (where / "by_day.proj" / "default_compression_codec.txt").write_bytes(b"CODEC(ZSTD(3)")
    assert unchecked_files_problem(where) == ("by_day.proj/default_compression_codec.txt (13 bytes): not a codec "
                                              "expression")


def test_an_unknown_substreams_version_is_not_judged_and_trailing_text_is(tmp_path):
    unknown = b"columns substreams version: 2\n?"
    assert unchecked_files_problem(part(tmp_path, {"columns_substreams.txt": unknown})) is None
    extra = WRITTEN["columns_substreams.txt"] + b"\tleft over\n"
    assert "text after the last column" in unchecked_files_problem(part(tmp_path, {"columns_substreams.txt": extra}))


def test_a_file_that_cannot_be_read_is_a_problem(tmp_path):
    where = part(tmp_path, {})
    (where / "metadata_version.txt").mkdir()  # a directory where the file should be
    assert "metadata_version.txt: cannot be read" in unchecked_files_problem(where)


@settings(max_examples=300, deadline=None)
@given(name=st.sampled_from(sorted(UNCHECKED)), raw=st.binary(max_size=300) | st.text(max_size=300).map(str.encode))
def test_any_bytes_get_an_answer_never_an_exception(tmp_path_factory, name, raw):
    answer = unchecked_files_problem(part(tmp_path_factory.mktemp("p"), {name: raw}))
    assert answer is None or answer.startswith(f"{name} ({len(raw)} bytes): ")
