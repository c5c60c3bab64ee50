"""The file-level pieces of ``ragmon.store.integrity``: the hard-linked copies of replaced parts, on real files."""

from __future__ import annotations

from pathlib import Path

from ragmon.store.parts import block_range as _block_range
from ragmon.store.parts import link_copy as _link_copy
from ragmon.store.parts import linked as _linked


def part(where: Path) -> Path:
    where.mkdir()
    (where / "data.bin").write_bytes(b"rows")
    (where / "count.txt").write_text("4")
    (where / "p.proj").mkdir()  # a projection: a directory inside the part
    (where / "p.proj" / "data.bin").write_bytes(b"projected")
    return where


def test_a_copy_is_hard_links_of_every_file_and_is_recognised_as_one(tmp_path):
    source = part(tmp_path / "202612_2_2_1")
    copy = tmp_path / "detached" / "202612_2_2_1"
    copy.parent.mkdir()
    _link_copy(source, copy)
    assert (copy / "data.bin").stat().st_ino == (source / "data.bin").stat().st_ino
    assert (copy / "p.proj" / "data.bin").read_bytes() == b"projected"
    assert _linked(source, copy)


def test_a_directory_with_the_same_names_but_other_files_is_not_a_copy(tmp_path):
    source = part(tmp_path / "a")
    other = part(tmp_path / "b")  # same names and contents, other inodes
    assert not _linked(source, other)


def test_a_copy_missing_a_file_is_not_a_copy(tmp_path):
    source = part(tmp_path / "a")
    copy = tmp_path / "c"
    _link_copy(source, copy)
    (copy / "p.proj" / "data.bin").unlink()
    assert not _linked(source, copy)


def test_block_ranges_come_from_the_engine_or_from_the_name():
    assert _block_range("202612_2_4_2", 2, 4) == (2, 4)
    assert _block_range("broken-on-start_202612_2_4_2", 0, 0) == (2, 4)
    assert _block_range("not-a-part", None, None) == (None, None)
