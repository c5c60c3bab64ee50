"""Importing and loading the settings reaches no store adapter: config uses the pure ``ragmon.store.dsn`` only.

Each probe runs in a fresh interpreter, because ``sys.modules`` of the test process already holds everything
other tests imported.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
ADAPTER = ("clickhouse_connect", "chdb", "ragmon.store.clickhouse", "ragmon.store.client")


def modules_after(code: str, env: dict[str, str] | None = None) -> set[str]:
    """Names in ``sys.modules`` after ``code`` runs in a fresh interpreter using this checkout."""
    clean = {k: v for k, v in os.environ.items() if not k.upper().startswith("RAGMON_")}
    probe = f"import json, sys\n{code}\nprint(json.dumps(sorted(sys.modules)))"
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120,
                            env={**clean, "PYTHONPATH": str(ROOT), **(env or {})}, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    return set(json.loads(result.stdout.splitlines()[-1]))


def adapter_modules(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if any(m == a or m.startswith(a + ".") for a in ADAPTER))


@pytest.mark.parametrize("code", [
    "import ragmon.config",
    "from ragmon.config import Settings, load_settings, mask_dsn, secret_value\nload_settings()",
    "import ragmon.store.dsn",
    "import ragmon.store",
])
def test_config_and_the_dsn_module_import_no_store_adapter(code: str):
    assert adapter_modules(modules_after(code)) == []


def test_loading_a_server_dsn_checks_it_without_the_adapter():
    modules = modules_after("from ragmon.config import load_settings\nload_settings()",
                            env={"RAGMON_STORE__DSN": "http://u:pw@clickhouse:8123/prod_db"})
    assert "ragmon.store.dsn" in modules
    assert adapter_modules(modules) == []


def test_the_probe_sees_the_adapter_once_it_is_asked_for():
    # the lazy package still hands out the adapter, and a probe that could never see it would prove nothing
    modules = modules_after("from ragmon.store import ClickHouseStore")
    assert {"ragmon.store.clickhouse", "ragmon.store.client"} <= modules
