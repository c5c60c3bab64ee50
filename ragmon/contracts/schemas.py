"""JSON Schema files generated from the contract models, and the check that the checked-in copies match."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ragmon.contracts.golden import GoldenCase
from ragmon.contracts.outcome import Outcome
from ragmon.contracts.trace import Trace

JSON_SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"

#: file name → model
SCHEMAS: dict[str, type] = {
    "trace.v1.schema.json": Trace,
    "golden-case.v1.schema.json": GoldenCase,
    "outcome.v1.schema.json": Outcome,
}


def generate(model: type) -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of a contract model, as validated input (JSON) sees it."""
    schema = model.model_json_schema(mode="validation")  # type: ignore[attr-defined]
    return {"$schema": JSON_SCHEMA_DIALECT, **schema}


def render(model: type) -> str:
    return json.dumps(generate(model), indent=2, sort_keys=False, ensure_ascii=False) + "\n"


def export(directory: Path) -> list[Path]:
    """Write every schema file into ``directory``; return the paths written."""
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name, model in SCHEMAS.items():
        path = directory / name
        path.write_text(render(model), encoding="utf-8")
        written.append(path)
    return written


def check(directory: Path) -> list[str]:
    """One line per schema file that is missing or differs from the models (empty when all match)."""
    problems = []
    for name, model in SCHEMAS.items():
        path = directory / name
        if not path.exists():
            problems.append(f"{path}: missing; run `ragmon schema export`")
        elif path.read_text(encoding="utf-8") != render(model):
            problems.append(f"{path}: differs from the models; run `ragmon schema export` and commit the result")
    return problems
