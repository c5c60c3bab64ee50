"""The drift statistics and decision modules stay pure: no I/O, no clock, no client libraries (STYLE.md)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

DRIFT = Path(__file__).resolve().parents[2] / "ragmon" / "drift"
PURE = ("stats.py", "summary.py", "registry.py", "decide.py", "windows.py", "features.py", "by_query.py",
        "replay.py", "offline.py", "traffic.py", "window_tests.py", "baseline.py", "sequential.py", "assess.py",
        "watch.py")
ALLOWED = ("__future__", "collections", "dataclasses", "functools", "typing", "math", "datetime", "numpy", "scipy",
           "ragmon.drift.stats", "ragmon.drift.summary", "ragmon.drift.registry", "ragmon.config", "ragmon.errors",
           "ragmon.drift")
CLOCK_CALLS = {"now", "utcnow", "today", "time", "monotonic", "perf_counter", "sleep", "open", "urlopen"}


@pytest.mark.parametrize("name", PURE)
def test_module_is_pure(name: str) -> None:
    tree = ast.parse((DRIFT / name).read_text())
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
