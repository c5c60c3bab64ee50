"""The Grafana dashboard: valid JSON, unique panel ids and positions, every query valid PromQL (checked by
promtool as recording rules) over metrics ragmon really exports."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from ragmon.telemetry import Telemetry
from tests.support.missing import missing

DASHBOARD = Path(__file__).resolve().parents[2] / "dashboards" / "ragmon-drift.json"


def _targets() -> list[str]:
    data = json.loads(DASHBOARD.read_text())
    return [t["expr"] for p in data["panels"] for t in p.get("targets", [])]


def test_dashboard_structure() -> None:
    data = json.loads(DASHBOARD.read_text())
    assert data["uid"] == "ragmon-drift" and data["title"]
    ids = [p["id"] for p in data["panels"]]
    assert len(ids) == len(set(ids))
    variables = {v["name"] for v in data["templating"]["list"]}
    assert {"datasource", "retriever", "variant", "stratum"} <= variables
    for p in data["panels"]:
        if p["type"] != "row":
            assert p["datasource"]["uid"] == "${datasource}" and p["targets"]
        g = p["gridPos"]
        assert 0 <= g["x"] and g["x"] + g["w"] <= 24


def test_dashboard_queries_use_exported_metrics() -> None:
    exported: set[str] = set()
    for family in Telemetry().registry.collect():
        exported.add(family.name)
        if family.type == "counter":
            exported.add(f"{family.name}_total")
    used = {m for expr in _targets() for m in re.findall(r"\bragmon_[a-z0-9_]+", expr)}
    assert {"ragmon_drift_detected", "ragmon_drift_feature_value", "ragmon_drift_p_value"} <= used
    assert used <= exported, sorted(used - exported)


@pytest.mark.prometheus
def test_dashboard_queries_are_valid_promql(tmp_path: Path) -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        missing("promtool not found; install Debian's prometheus package (apt-get install -y prometheus)")
    rules = [{"record": f"dashboard:query{i}", "expr": expr.replace("$retriever", ".*").replace("$variant", ".*")
              .replace("$stratum", ".*")} for i, expr in enumerate(_targets())]
    path = tmp_path / "dashboard-queries.yaml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}))
    result = subprocess.run([promtool, "check", "rules", str(path)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
