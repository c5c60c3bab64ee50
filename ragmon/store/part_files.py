"""The files of a part that ``CHECK TABLE … PART`` does not read, checked by their format.

``CHECK TABLE`` compares a part's files with its ``checksums.txt`` and parses ``columns.txt``, but three small files are
in neither (chDB 4.4, engine 26.9; observed by truncating each file of a committed part,
``tests/integration/test_store_part_files.py``): ``default_compression_codec.txt``, ``metadata_version.txt`` and
``columns_substreams.txt``. When the disk fills as the engine writes one of them last (it ignores the failed write,
``ragmon.store.integrity``), the part passes CHECK and reads work while the process runs, and the next start detaches
the part as ``broken-on-start``, every row of it gone. ``unchecked_files_problem`` reads those files of a part's
directory, and of its projections', and says what is wrong with them. Pure file reading: no SQL.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

#: ``CODEC(LZ4)``, ``CODEC(ZSTD(3))``: a codec expression, its parentheses balanced
_CODEC = re.compile(r"CODEC\(.+\)\n?")
_VERSION = re.compile(r"\d+\n?")
_SUBSTREAMS_VERSION = re.compile(r"columns substreams version: (\d+)\n")
_SUBSTREAMS_COUNT = re.compile(r"(\d+) columns:\n")
_SUBSTREAMS_COLUMN = re.compile(r"(\d+) substreams for column `(?:[^`\\]|\\.)*`:\n")
_SUBSTREAM = re.compile(r"\t[^\n]+\n")


def _codec(text: str) -> str | None:
    if not _CODEC.fullmatch(text) or text.count("(") != text.count(")"):
        return "not a codec expression"
    return None


def _version(text: str) -> str | None:
    return None if _VERSION.fullmatch(text) else "not a number"


def _substreams(text: str) -> str | None:
    version = _SUBSTREAMS_VERSION.match(text)
    if version is None:
        return "no version line"
    if version.group(1) != "1":  # a format this module does not know: not judged
        return None
    count = _SUBSTREAMS_COUNT.match(text, version.end())
    if count is None:
        return "no count of columns"
    at = count.end()
    for column in range(int(count.group(1))):
        block = _SUBSTREAMS_COLUMN.match(text, at)
        if block is None:
            return f"column {column + 1} of {count.group(1)} is cut short or missing"
        at = block.end()
        for _ in range(int(block.group(1))):
            line = _SUBSTREAM.match(text, at)
            if line is None:
                return f"the substreams of column {column + 1} are cut short"
            at = line.end()
    return None if at == len(text) else "text after the last column"


#: file name -> its check (a complaint, or None when the text is well formed)
UNCHECKED: dict[str, Callable[[str], str | None]] = {
    "default_compression_codec.txt": _codec,
    "metadata_version.txt": _version,
    "columns_substreams.txt": _substreams,
}


def unchecked_files_problem(part_dir: Path) -> str | None:
    """What is wrong with the files CHECK does not read in ``part_dir`` (and its ``*.proj`` projections), or None.
    A file that is absent is not judged (older parts and other formats do without); one that cannot be read is."""
    problems = []
    for directory in (part_dir, *sorted(part_dir.glob("*.proj"))):
        for name, check in UNCHECKED.items():
            path = directory / name
            try:
                raw = path.read_bytes()
            except FileNotFoundError:
                continue
            except OSError as exc:
                problems.append(f"{path.relative_to(part_dir)}: cannot be read ({exc.strerror or exc})")
                continue
            try:
                problem = check(raw.decode("utf-8"))
            except UnicodeDecodeError:
                problem = "not UTF-8 text"
            if problem is not None:
                problems.append(f"{path.relative_to(part_dir)} ({len(raw)} bytes): {problem}")
    return "; ".join(problems) if problems else None
