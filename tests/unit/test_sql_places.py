"""Where SQL is written (issue 33): a statement that reads or writes a ragmon table lives in the store layer
(``ragmon/store/``) or in a role's queries module (a module whose name ends in ``queries.py``: ``leaks/queries.py``,
``review/triage_queries.py``, ``drift/check/window_queries.py``), never inline in the code that uses its rows.

A statement is a string literal of the code (docstrings left out: they may describe one) that starts one —
``SELECT``, ``INSERT INTO``, ``ALTER TABLE``, ``CREATE TABLE``/``VIEW``, ``DELETE FROM``, ``OPTIMIZE TABLE``,
``TRUNCATE``, ``DROP TABLE`` — and names a table after ``FROM``/``INTO``/``JOIN``/``TABLE``: a formatted-in name
(``{store.table('traces')}``, a ``{traces}`` placeholder) or one of the tables the migrations create. In an f-string
every formatted-in value reads as ``{…}``.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "ragmon"
TABLES = sorted({m.group(1) for sql in (PACKAGE / "store" / "migrations").glob("*.sql")
                 for m in re.finditer(r"CREATE TABLE IF NOT EXISTS \$\{db\}\.(\w+)", sql.read_text(encoding="utf-8"))})
_STATEMENT = re.compile(r"\b(SELECT|INSERT\s+INTO|ALTER\s+TABLE|CREATE\s+(TABLE|VIEW|MATERIALIZED\s+VIEW)|DELETE\s+FROM"
                        r"|OPTIMIZE\s+TABLE|TRUNCATE|DROP\s+TABLE)\b")
_TABLE = re.compile(r"\b(FROM|INTO|JOIN|TABLE)\s+\(?\s*(\{|\$\{db\}\.|(" + "|".join(TABLES) + r")\b)")


def is_statement(text: str) -> bool:
    """Does this text start a SQL statement over a ragmon table?"""
    return bool(_STATEMENT.search(text) and _TABLE.search(text))


def _docstrings(tree: ast.Module) -> set[int]:
    """ids of the string constants that are docstrings (of the module, a class or a function)."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                out.add(id(first.value))
    return out


def _text(node: ast.JoinedStr) -> str:
    return "".join(v.value if isinstance(v, ast.Constant) else "{…}" for v in node.values)


def statements(source: str, where: str) -> list[str]:
    """``where:line`` and the start of each SQL statement written in ``source``."""
    tree = ast.parse(source)
    docs = _docstrings(tree)
    inside_fstring = {id(v) for node in ast.walk(tree) if isinstance(node, ast.JoinedStr) for v in node.values}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            text = _text(node)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs | inside_fstring:
            text = node.value
        else:
            continue
        if is_statement(text):
            found.append(f"{where}:{node.lineno} {' '.join(text.split())[:60]}")
    return sorted(found, key=lambda f: (f.split(" ")[0].rsplit(":", 1)[0], int(f.split(" ")[0].rsplit(":", 1)[1])))


def allowed(path: Path) -> bool:
    relative = path.relative_to(PACKAGE)
    return relative.parts[0] == "store" or path.name.endswith("queries.py")


def test_sql_is_written_only_in_the_store_and_queries_modules():
    found = [s for p in sorted(PACKAGE.rglob("*.py")) if not allowed(p)
             for s in statements(p.read_text(encoding="utf-8"), str(p.relative_to(ROOT)))]
    assert found == [], "move these statements into the role's queries module (or ragmon/store/)"


def test_the_places_that_may_hold_sql_do():
    """The rule above is not vacuous: the store and the queries modules are where the statements are."""
    holders = {str(p.relative_to(ROOT)) for p in sorted(PACKAGE.rglob("*.py")) if allowed(p)
               and statements(p.read_text(encoding="utf-8"), "")}
    assert "ragmon/leaks/queries.py" in holders and any(h.startswith("ragmon/store/") for h in holders)
    assert {"traces", "scores", "drift_checks", "outcomes"} <= set(TABLES)


def test_the_detector_finds_statements_and_leaves_prose_alone():
    code = '''"""Reads with SELECT … FROM traces (a docstring may say so)."""
def f(store, t):
    """Counts: SELECT count() FROM {traces}."""
    a = store.command(f"SELECT count() FROM {store.table('traces')} FINAL")
    c = "INSERT INTO {{traces}} (a) SELECT 1"
    d = "ALTER TABLE scores ADD COLUMN z UInt8"
    e = "select the traces from the queue"
    g = f"SELECT {t}"
    return a, c, d, e, g
'''
    assert statements(code, "m.py") == ["m.py:4 SELECT count() FROM {…} FINAL",
                                        "m.py:5 INSERT INTO {{traces}} (a) SELECT 1",
                                        "m.py:6 ALTER TABLE scores ADD COLUMN z UInt8"]
