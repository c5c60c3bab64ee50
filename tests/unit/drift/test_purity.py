"""The shared statistics (ragmon/stats/) and the drift decision modules stay pure: no I/O, no clock, no client
libraries (STYLE.md)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

RAGMON = Path(__file__).resolve().parents[3] / "ragmon"
PURE = ("stats/shift.py", "stats/intervals.py",
        "drift/method/summary.py", "drift/method/registry.py", "drift/method/decide.py", "drift/method/windows.py",
        "drift/method/features.py", "drift/method/window_tests.py", "drift/method/baseline.py",
        "drift/method/sequential.py", "drift/method/assess.py",
        "drift/check/replay.py", "drift/check/watch.py",
        "drift/simulation/by_query.py", "drift/simulation/offline.py", "drift/simulation/traffic.py",
        "drift/simulation/draw.py")
ALLOWED = ("__future__", "collections", "dataclasses", "functools", "typing", "math", "datetime", "numpy", "scipy",
           "ragmon.stats", "ragmon.drift.method.summary", "ragmon.drift.method.registry", "ragmon.config",
           "ragmon.errors", "ragmon.drift")
CLOCK_CALLS = {"now", "utcnow", "today", "time", "monotonic", "perf_counter", "sleep", "open", "urlopen"}


@pytest.mark.parametrize("name", PURE)
def test_module_is_pure(name: str) -> None:
    tree = ast.parse((RAGMON / name).read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            modules = [node.module or ""]
        else:
            modules = []
        for module in modules:
            assert module.startswith(ALLOWED), f"{name} imports {module}"
        if isinstance(node, ast.Call):
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            assert called not in CLOCK_CALLS, f"{name} calls {called}() (line {node.lineno})"
