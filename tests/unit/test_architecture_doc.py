"""docs/architecture.md is true to the code: every role, table and package that exists is named, and every
``ragmon/…`` path it names exists."""

from __future__ import annotations

import re
from pathlib import Path

from ragmon.process import ROLES

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "architecture.md"
MIGRATIONS = ROOT / "ragmon" / "store" / "migrations"
_CREATE = re.compile(r"CREATE TABLE IF NOT EXISTS\s+[\w${}.]+?\.(\w+)")


def _doc() -> str:
    return DOC.read_text(encoding="utf-8")


def tables() -> set[str]:
    found = {m.group(1) for f in MIGRATIONS.glob("*.sql") for m in _CREATE.finditer(f.read_text(encoding="utf-8"))}
    return found | {"schema_migrations"}  # the migration ledger, created by store/migrate.py


def packages() -> set[str]:
    return {f"ragmon/{p.parent.name}/" for p in (ROOT / "ragmon").glob("*/__init__.py")}


def test_the_table_list_is_read_from_the_migrations():
    assert {"traces", "scores", "drift_checks", "outcomes"} <= tables()  # the reader above is not blind


def test_every_table_is_named():
    named = set(re.findall(r"`(\w+)`", _doc()))
    assert sorted(tables() - named) == [], "tables missing from docs/architecture.md (name them in backquotes)"


def test_every_package_is_named():
    doc = _doc()
    assert sorted(p for p in packages() if p not in doc) == []


def test_every_role_is_named():
    doc = _doc()
    missing = [r for r in ROLES if not re.search(rf"\b{r}\b", doc.split("## Package layout")[0])]
    assert missing == [], "roles missing from the picture at the top of docs/architecture.md"
    assert all(f"`{r}`" in doc for r in ROLES), "each role named in backquotes in the roles table"


def test_every_path_named_exists():
    named = set(re.findall(r"ragmon/[\w/]+(?:\.py|/)", _doc()))
    assert named, "the doc names paths"
    missing = sorted(p for p in named if "<" not in p and not (ROOT / p).exists())
    assert missing == [], "paths named in docs/architecture.md that do not exist"
