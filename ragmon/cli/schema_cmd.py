"""``ragmon schema``: export and check the JSON Schema files generated from the contract models, and validate
payloads (traces, golden cases and sets) the way ingest and the gate will."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from pydantic import TypeAdapter, ValidationError
from rich.table import Table
from rich.text import Text

from ragmon.cli.common import console, fail
from ragmon.cli.options import check_output_dir
from ragmon.contracts import GoldenCase, Rejection, decode_trace, schemas
from ragmon.contracts.decode import DEFAULT_MAX_BYTES
from ragmon.errors import InputError
from ragmon.golden_files import parse_golden

app = typer.Typer(help="JSON Schemas of the trace and golden-case contracts.", no_args_is_help=True)

DirOption = Annotated[Path, typer.Option("--dir", help="Directory holding the schema files.")]


@app.command("export")
def export(directory: DirOption = Path("schemas")) -> None:
    """Write trace.v1.schema.json and golden-case.v1.schema.json from the pydantic models."""
    check_output_dir(directory, "--dir")
    for path in schemas.export(directory):
        console.print(f"wrote {path}")


@app.command("check")
def check(directory: DirOption = Path("schemas")) -> None:
    """Exit 1 if a checked-in schema file differs from the models (CI runs this)."""
    problems = schemas.check(directory)
    if problems:
        for line in problems:
            console.print(line, markup=False, soft_wrap=True)  # paths must not wrap
        raise fail(f"{len(problems)} schema file(s) out of date", code=1)
    console.print(f"schemas in {directory} match the models ({len(schemas.SCHEMAS)} files)")


@app.command("validate")
def validate(
    paths: Annotated[list[Path], typer.Argument(help="JSON files (a trace, a golden case or a golden set) or .jsonl "
                                                     "files with one trace per line.", show_default=False)],
    kind: Annotated[str, typer.Option(
        "--kind", help="trace, golden-case, golden-set, or auto (a JSON array is a golden set, an object with "
        "expected_behaviour a golden case, anything else a trace).")] = "auto",
    max_bytes: Annotated[int, typer.Option(
        "--max-bytes", min=1,
        help="Reject traces larger than this, like ingest.max_message_bytes.")] = DEFAULT_MAX_BYTES,
) -> None:
    """Check payloads the way ingest and the gate will: exit 1 if any is invalid, naming the reason and field."""
    if kind not in ("auto", "trace", "golden-case", "golden-set"):
        raise fail(f"--kind {kind!r} is not one of auto, trace, golden-case, golden-set")
    table = Table(title="ragmon schema validate")
    for column in ("file", "kind", "verdict", "detail"):
        table.add_column(column, overflow="fold")  # paths and field names are never cut
    bad = 0
    for path in paths:
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise fail(f"{path}: cannot read ({exc.strerror or exc})") from None
        items = _lines(data) if path.suffix == ".jsonl" else [(None, data)]
        for line, raw in items:
            where = f"{path}:{line}" if line is not None else str(path)
            what = _kind(raw) if kind == "auto" else kind
            verdict, detail = _check(what, raw, max_bytes)
            bad += verdict != "valid"
            table.add_row(Text(where), what, Text(verdict, style="green" if verdict == "valid" else "bold red"),
                          Text(detail))
    console.print(table)
    if bad:
        raise fail(f"{bad} invalid payload(s)", code=1)


def _lines(data: bytes) -> list[tuple[int, bytes]]:
    return [(n, line) for n, line in enumerate(data.split(b"\n"), start=1) if line.strip()]


def _kind(raw: bytes) -> str:
    head = raw.lstrip()[:1]
    if head == b"[":  # a golden set, unless it is traces wrapped in an array (a trace must be an object)
        return "trace" if b'"trace_id"' in raw else "golden-set"
    if b'"cases"' in raw and b'"trace_id"' not in raw:  # the gate's envelope: {"name", "version", "set", "cases"}
        return "golden-set"
    return "golden-case" if b'"expected_behaviour"' in raw and b'"trace_id"' not in raw else "trace"


def _check(kind: str, raw: bytes, max_bytes: int) -> tuple[str, str]:
    if kind == "trace":
        result = decode_trace(raw, max_bytes=max_bytes)
        if isinstance(result, Rejection):
            return result.reason, result.detail
        unknown = ", ".join(result.unknown_fields)
        return "valid", f"unknown top-level fields (kept, counted): {unknown}" if unknown else ""
    if kind == "golden-set":
        return _check_golden_set(raw)
    model = TypeAdapter(GoldenCase)
    try:
        model.validate_json(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(top level)"
        more = f" (+{exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
        return "schema", f"{where}: {first['msg']}{more}"
    return "valid", ""


def _check_golden_set(raw: bytes) -> tuple[str, str]:
    """As the gate reads it: a bare array of cases or the envelope, unique ids, every problem counted."""
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        return "invalid_json", str(exc)[:300]
    try:
        golden = parse_golden(data, Path("golden set"))
    except InputError as exc:
        problems = [line.strip() for line in str(exc).splitlines()[1:]]
        more = f" (+{len(problems) - 1} more)" if len(problems) > 1 else ""
        return "schema", (problems[0] if problems else str(exc)) + more
    return "valid", (f"{len(golden.cases)} cases"
                     + (f", {golden.set_name} set {golden.version}" if golden.set_name else ""))
