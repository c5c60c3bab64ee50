"""The Grafana dashboards (every dashboards/*.json): valid JSON, unique panel ids and positions, every query valid
PromQL (checked by promtool as recording rules) over metrics ragmon really exports; the daemon dashboard has a row
per role with the panels on-call needs."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.support.metric_names import exported_metric_names
from tests.support.missing import missing

DASHBOARDS = sorted((Path(__file__).resolve().parents[2] / "dashboards").glob("*.json"))
DRIFT = next(p for p in DASHBOARDS if p.name == "ragmon-drift.json")
DAEMON = next(p for p in DASHBOARDS if p.name == "ragmon-daemon.json")
VARIABLES = ("$retriever", "$variant", "$stratum")


def _targets(path: Path) -> list[str]:
    data = json.loads(path.read_text())
    return [t["expr"] for p in data["panels"] for t in p.get("targets", [])]


@pytest.mark.parametrize("path", DASHBOARDS, ids=[p.name for p in DASHBOARDS])
def test_dashboard_structure(path: Path) -> None:
    data = json.loads(path.read_text())
    assert data["uid"] == path.stem and data["title"]
    ids = [p["id"] for p in data["panels"]]
    assert len(ids) == len(set(ids))
    variables = {v["name"] for v in data["templating"]["list"]}
    assert {"datasource", "retriever", "variant", "stratum"} <= variables
    cells: set[tuple[int, int]] = set()
    for p in data["panels"]:
        if p["type"] != "row":
            assert p["datasource"]["uid"] == "${datasource}" and p["targets"]
        g = p["gridPos"]
        assert 0 <= g["x"] and g["x"] + g["w"] <= 24
        mine = {(x, y) for x in range(g["x"], g["x"] + g["w"]) for y in range(g["y"], g["y"] + g["h"])}
        assert not mine & cells, f"panel {p['title']!r} overlaps another"
        cells |= mine


@pytest.mark.parametrize("path", DASHBOARDS, ids=[p.name for p in DASHBOARDS])
def test_every_query_uses_exported_metrics(path: Path) -> None:
    used = {m for expr in _targets(path) for m in re.findall(r"\bragmon_[a-z0-9_]+", expr)}
    assert used and used <= exported_metric_names(), ("not in the metric catalogue (ragmon/telemetry/catalogue.py): "
                                                      f"{sorted(used - exported_metric_names())}")
    assert all(re.search(r"\bragmon_[a-z0-9_]+", expr) for expr in _targets(path)), "a query reads no ragmon metric"


def test_drift_dashboard_keeps_its_panels() -> None:
    used = {m for expr in _targets(DRIFT) for m in re.findall(r"\bragmon_[a-z0-9_]+", expr)}
    assert {"ragmon_drift_detected", "ragmon_drift_feature_value", "ragmon_drift_p_value"} <= used


def test_daemon_dashboard_has_a_row_per_role_and_the_panels_on_call_needs() -> None:
    data = json.loads(DAEMON.read_text())
    rows = [p["title"].split(" ")[0] for p in data["panels"] if p["type"] == "row"]
    assert rows == ["Ingest", "Score", "Drift", "Quality", "Review", "Shadow"]
    exprs = "\n".join(_targets(DAEMON))
    for needed in ("rate(ragmon_ingest_messages_consumed_total", "ragmon_ingest_consumer_lag_messages",
                   "sum by (reason) (rate(ragmon_ingest_dead_letters_total",
                   "ragmon_ingest_write_duration_seconds_bucket", "ragmon_score_backlog_traces",
                   'ragmon_judge_calls_total{outcome="error"}', "ragmon_review_items_reviewed",
                   "ragmon_drift_feature_value", "ragmon_shadow_quality_delta"):
        assert needed in exprs, needed
    assert any(link["url"].startswith("${console}") for link in data["links"] if link["type"] == "link")


@pytest.mark.prometheus
@pytest.mark.parametrize("path", DASHBOARDS, ids=[p.name for p in DASHBOARDS])
def test_dashboard_queries_are_valid_promql(tmp_path: Path, path: Path) -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        missing("promtool not found; install Debian's prometheus package (apt-get install -y prometheus)")
    queries = _targets(path)
    for variable in VARIABLES:
        queries = [q.replace(variable, ".*") for q in queries]
    rules = [{"record": f"dashboard:query{i}", "expr": expr} for i, expr in enumerate(queries)]
    rules_file = tmp_path / "dashboard-queries.yaml"
    rules_file.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}))
    result = subprocess.run([promtool, "check", "rules", str(rules_file)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(rules)} rules found" in result.stdout
