"""Structure limits that keep the code easy to read (issue 33): no module of ``ragmon/`` over 400 lines, no function
over 80 lines of its own. A function's own lines run from its ``def`` to its end (decorators left out, docstring
in), less the lines of the functions and classes defined directly inside it, which are counted as functions of their
own: a router factory is as long as its own code, each route handler as long as its. Import circles are checked in
``test_layers.py``."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 80


def own_lines(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    nested: list[ast.AST] = []

    def visit(parent: ast.AST) -> None:
        for child in ast.iter_child_nodes(parent):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                nested.append(child)
            else:
                visit(child)

    visit(node)
    inner = sum(c.end_lineno - min([d.lineno for d in c.decorator_list] + [c.lineno]) + 1  # type: ignore[attr-defined]
                for c in nested)
    return node.end_lineno - node.lineno + 1 - inner  # type: ignore[operator]


def long_functions(source: str, where: str) -> list[str]:
    return [f"{where}:{node.lineno} {node.name} ({own_lines(node)} lines)" for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and own_lines(node) > MAX_FUNCTION_LINES]


def test_no_module_is_over_400_lines():
    long = {str(p.relative_to(ROOT)): n for p in sorted((ROOT / "ragmon").rglob("*.py"))
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES}
    assert long == {}, "split these modules by what they hold"


def test_no_function_is_over_80_lines_of_its_own():
    found = [f for p in sorted((ROOT / "ragmon").rglob("*.py"))
             for f in long_functions(p.read_text(encoding="utf-8"), str(p.relative_to(ROOT)))]
    assert found == [], "split these functions into named steps"


def test_the_counter_counts_a_nested_function_apart():
    body = "\n".join(f"    x{i} = {i}" for i in range(70))
    inner = "\n".join(f"        y{i} = {i}" for i in range(70))
    outer = f"def outer():\n{body}\n    @decorator\n    def inner():\n{inner}\n    return inner\n"
    assert long_functions(outer, "m") == []
    assert long_functions(outer.replace("    return inner", body + "\n    return inner"), "m") == [
        "m:1 outer (142 lines)"]
