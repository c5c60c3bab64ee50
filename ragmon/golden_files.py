"""Golden-set files, read and written: validation with errors that name the case id and the field.

Shared by every part that uses a golden set (the gate, the coverage check, the review export, ``ragmon golden``,
the demo), so it sits below the roles and imports none of them. Must not reach the store or a network.

A golden file is either a JSON array of ``golden-case.v1`` cases, or an envelope that also says which set and
version it is::

    {"name": "support", "version": "2026-04-01.1", "set": "dev", "cases": [ ...golden-case.v1... ]}

The set's content hash is the SHA-256 of its cases in canonical JSON (key order and whitespace do not matter);
a bare array has no declared version, so its version is that hash. Everything wrong with a file is an
``InputError`` listing every problem (up to a cap), each with the case's position, id and field path.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

from pydantic import ValidationError

from ragmon.contracts.golden import GoldenCase, GoldenSet
from ragmon.errors import InputError

SETS = ("dev", "release")
ENVELOPE_KEYS = {"name", "version", "set", "cases", "description"}
MAX_PROBLEMS = 20
MAX_FILE_BYTES = 256 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class GoldenFile:
    """A validated golden set and what identifies it."""

    path: str
    name: str
    version: str
    set_name: str | None  # "dev" or "release" when the file declares it
    sha256: str
    cases: tuple[GoldenCase, ...]


def canonical_hash(cases: list[GoldenCase] | tuple[GoldenCase, ...]) -> str:
    """SHA-256 of the cases as canonical JSON: the golden set's content address."""
    payload = [c.model_dump(mode="json") for c in cases]
    text = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def _case_label(raw: list[Any], index: object) -> str:
    if isinstance(index, int) and 0 <= index < len(raw):
        item = raw[index]
        case_id = item.get("id") if isinstance(item, dict) else None
        if isinstance(case_id, str) and case_id:
            return f"case {case_id!r} (#{index + 1})"
        return f"case #{index + 1} (no id)"
    return "the file"


def _field_path(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(the case itself)"


def _problems(raw: list[Any], exc: ValidationError) -> list[str]:
    lines = []
    for err in exc.errors(include_url=False):
        loc = tuple(err["loc"])
        index, rest = (loc[0], loc[1:]) if loc else (None, ())
        message = err["msg"].removeprefix("Value error, ")
        lines.append(f"{_case_label(raw, index)}: {_field_path(rest)}: {message}")
    return lines


def _raise(path: Path, problems: list[str]) -> NoReturn:
    shown = problems[:MAX_PROBLEMS]
    more = len(problems) - len(shown)
    tail = f"\n  … and {more} more" if more > 0 else ""
    raise InputError(
        f"{path}: invalid golden set ({len(problems)} problem(s)); fix the fields named below "
        "(schema: schemas/golden-case.v1.schema.json)\n" + "\n".join(f"  {p}" for p in shown) + tail
    )


def _read(path: Path) -> Any:
    try:
        if path.stat().st_size > MAX_FILE_BYTES:
            raise InputError(f"{path}: golden file is larger than {MAX_FILE_BYTES // 2**20} MiB; split it")
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"{path}: no such golden file") from None
    except IsADirectoryError:
        raise InputError(f"{path}: is a directory; pass the golden JSON file") from None
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not UTF-8 text (byte {exc.start}); save the golden set as UTF-8 JSON") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}: not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}") from None
    except RecursionError:
        raise InputError(f"{path}: JSON nested too deeply to be a golden set") from None


def load_golden(path: Path) -> GoldenFile:
    """Read and validate a golden file; ``InputError`` naming every bad case id and field otherwise."""
    return parse_golden(_read(path), path)


def parse_golden(data: Any, path: Path) -> GoldenFile:
    """Validate parsed JSON as a golden file (a bare array or an envelope); ``path`` names it in messages."""
    name, version, set_name = path.stem, None, None
    if isinstance(data, dict):
        unknown = sorted(set(data) - ENVELOPE_KEYS)
        if unknown or "cases" not in data:
            _raise(path,
                   [f"the file: an object needs 'cases' and may hold {sorted(ENVELOPE_KEYS)}; unknown: {unknown}"])
        problems = []
        for key in ("name", "version"):
            if key in data and (not isinstance(data[key], str) or not data[key]):
                problems.append(f"the file: {key}: must be a non-empty string")
        if "set" in data and data["set"] not in SETS:
            problems.append(f"the file: set: must be one of {', '.join(SETS)}, got {data['set']!r}")
        if problems:
            _raise(path, problems)
        name, version, set_name = data.get("name", name), data.get("version"), data.get("set")
        data = data["cases"]
    if not isinstance(data, list):
        _raise(path, ["the file: must be a JSON array of golden cases (or an object with 'cases')"])
    if not data:
        _raise(path, ["the file: holds no cases"])
    try:
        cases = GoldenSet.validate_python(data)
    except ValidationError as exc:
        _raise(path, _problems(data, exc))
    seen: dict[str, int] = {}
    duplicates = []
    for i, case in enumerate(cases):
        if case.id in seen:
            duplicates.append(f"case {case.id!r} (#{i + 1}): id: duplicates case #{seen[case.id] + 1}; ids must be "
                              "unique")
        seen.setdefault(case.id, i)
    if duplicates:
        _raise(path, duplicates)
    digest = canonical_hash(cases)
    return GoldenFile(
        path=str(path),
        name=name,
        version=version or f"sha256:{digest[:12]}",
        set_name=set_name,
        sha256=digest,
        cases=tuple(cases),
    )


def write_golden(path: Path, cases: list[GoldenCase] | tuple[GoldenCase, ...]) -> None:
    """Write ``cases`` as a golden-set file (a JSON array of golden-case.v1), atomically: a reader sees the old
    file or the new one, never half of it."""
    data = [c.model_dump(mode="json") for c in cases]
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)
