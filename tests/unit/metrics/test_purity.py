"""ragmon.metrics (and ragmon.stats, the statistics beside it) stay pure: no module in them imports I/O, clock,
randomness or client libraries.

The live scorer and the offline gate both call these functions; a metric that read a clock or a file would
score the same trace differently in the two places. This is the import contract the style guide asks for.
"""

from __future__ import annotations

import ast
from pathlib import Path

import ragmon.metrics
import ragmon.stats

FORBIDDEN = {
    "os", "io", "sys", "time", "datetime", "random", "subprocess", "socket", "pathlib", "shutil", "tempfile",
    "logging", "threading", "asyncio", "httpx", "requests", "urllib", "clickhouse_connect", "chdb", "kafka",
    "prometheus_client", "ragmon.store", "ragmon.config", "ragmon.telemetry", "ragmon.cli", "ragmon.gate",
    "ragmon.judge", "ragmon.ingest",
}  # fmt: skip


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def test_metrics_modules_import_nothing_impure() -> None:
    offenders = {}
    packages = (Path(ragmon.metrics.__file__).parent, Path(ragmon.stats.__file__).parent)
    for path in sorted(path for package in packages for path in package.glob("*.py")):
        bad = {n for n in _imports(path) if any(n == f or n.startswith(f + ".") for f in FORBIDDEN)}
        if bad:
            offenders[f"{path.parent.name}/{path.name}"] = sorted(bad)
    assert offenders == {}, f"ragmon.metrics and ragmon.stats must stay pure (no I/O, no clock): {offenders}"


def test_the_check_can_fail(tmp_path: Path) -> None:
    impure = tmp_path / "impure.py"
    impure.write_text("import time\nfrom ragmon.store import ClickHouseStore\n")
    assert {"time", "ragmon.store"} <= _imports(impure)


def test_every_public_function_says_what_it_does_not_catch() -> None:
    import inspect

    missing = [
        name
        for name in ragmon.metrics.__all__
        if inspect.isfunction(obj := getattr(ragmon.metrics, name)) and "Does NOT catch" not in (obj.__doc__ or "")
    ]
    assert missing == []
