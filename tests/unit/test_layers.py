"""The package's structure (issue #15): dependencies point one way — cli → process → roles → store/judge/metrics
→ config/contracts/errors, the import-linter contract in pyproject.toml — and no two modules import each other,
directly or around a circle (imports inside functions count too). The role packages are independent of each other
(issue #33): what two roles share lives a layer down, and the process assembler is what puts roles together."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import grimp

from ragmon.process import ROLES

ROOT = Path(__file__).resolve().parents[2]


def test_layers_contract_is_kept() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    run = subprocess.run([sys.executable, "-c", "from importlinter.cli import lint_imports_command; "
                          "lint_imports_command()"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    assert "Contracts: 2 kept, 0 broken" in run.stdout  # the layers, and drift's parts


def _role_layer() -> str:
    """The contract's layer of role packages (the one that names ``ragmon.drift``)."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["importlinter"]
    (layer,) = [layer for c in config["contracts"] if c["name"] == "dependencies point one way"
                for layer in c["layers"] if "ragmon.drift" in layer]
    return layer


def role_packages() -> list[str]:
    return [name.strip().removeprefix("ragmon.") for name in _role_layer().replace(":", "|").split("|")]


def imports_between(graph: grimp.ImportGraph, packages: list[str]) -> list[str]:
    """Every direct import from one of ``packages`` (``ragmon.<name>``) into another, as ``importer -> imported``."""
    def package(module: str) -> str | None:
        parts = module.split(".")
        return parts[1] if len(parts) > 1 and parts[1] in packages else None

    return sorted(f"{m} -> {i}" for m in graph.modules if package(m)
                  for i in graph.find_modules_directly_imported_by(m) if package(i) not in (None, package(m)))


def test_role_packages_import_no_other_role_package() -> None:
    assert imports_between(grimp.build_graph("ragmon"), role_packages()) == []


def test_the_contract_keeps_every_role_package_independent() -> None:
    assert ":" not in _role_layer(), "role packages are independent siblings: join them with '|', not ':'"
    with_role_module = {p.parent.name for p in (ROOT / "ragmon").glob("*/role.py")}
    assert {"ingest", "drift", "coverage", "judge_agreement"} <= with_role_module  # the glob is not blind
    assert sorted(with_role_module - set(role_packages())) == []
    assert sorted(with_role_module) == sorted(ROLES), "the roles a process runs are the packages with a role.py"


def test_an_import_between_roles_is_found() -> None:
    graph = grimp.ImportGraph()
    for module in ("ragmon.a.x", "ragmon.b.y", "ragmon.c.z", "ragmon.low"):
        graph.add_module(module)
    graph.add_import(importer="ragmon.a.x", imported="ragmon.b.y")
    graph.add_import(importer="ragmon.c.z", imported="ragmon.low")
    assert imports_between(graph, ["a", "b", "c"]) == ["ragmon.a.x -> ragmon.b.y"]


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def test_no_import_cycles_between_modules() -> None:
    graph = grimp.build_graph("ragmon")
    edges = {m: set(graph.find_modules_directly_imported_by(m)) for m in graph.modules}
    # a package's __init__ re-exporting its modules is not a cycle of the code: leave package → own child out
    edges = {m: {i for i in imported if not i.startswith(m + ".")} for m, imported in edges.items()}
    assert _cycles(edges) == []


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
