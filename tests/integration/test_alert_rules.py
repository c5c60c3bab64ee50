"""The alert rules: promtool check and unit tests (Debian's prometheus package), and the conventions every
alert must follow (severity, summary, description, runbook with four sections, a fires and a stays-quiet case,
metric names that ragmon really exports). The example Alertmanager configuration: amtool's check (Debian's
prometheus-alertmanager package), the receiver each alert's severity routes to, and which alerts a stalled ingest
inhibits (tests/integration/test_alertmanager_e2e.py delivers through it)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.support.metric_names import exported_metric_names
from tests.support.missing import missing
from tests.support.prometheus import binary

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "alerts" / "ragmon.rules.yaml"
TESTS = sorted((ROOT / "alerts" / "tests").glob("*.yaml"))
AM_CONFIG = ROOT / "alerts" / "alertmanager.yml"
#: the receiver of alerts/alertmanager.yml each severity routes to
RECEIVERS = {"critical": "ragmon-page", "warning": "ragmon-ticket", "info": "ragmon-info"}
#: the runbook's base comes from ragmon_links_info (console.runbook_base_url, or the copy the daemon serves), else
#: a path on ragmon's own port (the daemon serves the runbooks: issue 32)
RUNBOOK_URL = ("{{{{ with query `max by (runbook_base_url) (ragmon_links_info{{runbook_base_url!=\"\"}})` }}}}"
               "{{{{ (index . 0).Labels.runbook_base_url }}}}{{{{ else }}}}"
               "/review/console/runbooks{{{{ end }}}}/{name}.md")
#: the console's address comes from ragmon_links_info (console.public_url); a path on ragmon's port without it
CONSOLE_URL = "{{ with query `max by (console_url) (ragmon_links_info{console_url!=\"\"})` }}" \
              "{{ (index . 0).Labels.console_url }}{{ end }}/review/"
SECTIONS = ("## Meaning", "## Impact", "## Diagnosis", "## Mitigation")

pytestmark = pytest.mark.prometheus


@pytest.fixture(scope="module")
def promtool() -> str:
    path = shutil.which("promtool")
    if path is None:
        message = "promtool not found; install Debian's prometheus package (apt-get install -y prometheus)"
        missing(message)
    return path


def _alerts() -> list[dict]:
    groups = yaml.safe_load(RULES.read_text())["groups"]
    return [rule for group in groups for rule in group["rules"] if "alert" in rule]


def test_promtool_check_rules(promtool: str) -> None:
    result = subprocess.run([promtool, "check", "rules", str(RULES)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    total = sum(len(group["rules"]) for group in yaml.safe_load(RULES.read_text())["groups"])
    assert f"SUCCESS: {total} rules found" in result.stdout, result.stdout  # promtool read every rule


@pytest.mark.parametrize("test_file", TESTS, ids=[p.name for p in TESTS])
def test_promtool_unit_tests(promtool: str, test_file: Path) -> None:
    result = subprocess.run([promtool, "test", "rules", test_file.name], capture_output=True, text=True,
                            timeout=120, cwd=test_file.parent)
    assert result.returncode == 0, result.stdout + result.stderr


def test_required_alerts_exist() -> None:
    names = {rule["alert"] for rule in _alerts()}
    required = {"RagmonRetrievalScoreDrift", "RagmonEmptyShortlistRateHigh", "RagmonFaithfulnessDrop",
                "RagmonRefusalRateShift", "RagmonIngestStalled", "RagmonConsumerLagHigh", "RagmonDeadLetterRateHigh",
                "RagmonJudgeErrors", "RagmonDriftCheckStale", "RagmonMetricsAbsent"}
    assert required <= names
    assert any("absent(" in rule["expr"] for rule in _alerts())


@pytest.mark.parametrize("rule", _alerts(), ids=lambda r: r["alert"])
def test_alert_has_severity_annotations_and_runbook(rule: dict) -> None:
    name = rule["alert"]
    assert re.fullmatch(r"Ragmon[A-Z][A-Za-z]+", name)
    assert rule.get("labels", {}).get("severity") in {"critical", "warning", "info"}
    annotations = rule.get("annotations", {})
    assert annotations.get("summary") and annotations.get("description")
    assert annotations.get("runbook_url") == RUNBOOK_URL.format(name=name)
    assert annotations.get("dashboard_url", "").startswith(CONSOLE_URL)  # every alert links to the console
    for label in re.findall(r"\$labels\.(\w+)", annotations["dashboard_url"]):  # filtered to the alert's group,
        assert f"$labels.{label} | urlquery" in annotations["dashboard_url"]  # each value URL-encoded
    runbook = ROOT / "alerts" / "runbooks" / f"{name}.md"
    assert runbook.is_file(), f"missing runbook {runbook.relative_to(ROOT)}"
    text = runbook.read_text()
    assert text.startswith(f"# {name}\n")
    missing = [s for s in SECTIONS if s not in text]
    assert not missing, f"{runbook.name} lacks {missing}"


def test_every_alert_has_a_fires_and_a_quiet_case() -> None:
    fires: set[str] = set()
    quiet: set[str] = set()
    for path in TESTS:
        for case in yaml.safe_load(path.read_text())["tests"]:
            for check in case.get("alert_rule_test", []):
                (fires if check.get("exp_alerts") else quiet).add(check["alertname"])
    names = {rule["alert"] for rule in _alerts()}
    assert names - fires == set(), "alerts without a 'fires' promtool case"
    assert names - quiet == set(), "alerts without a 'stays quiet' promtool case"


def test_rules_use_only_metrics_ragmon_exports() -> None:
    exported = exported_metric_names()
    texts = [rule["expr"] for rule in _alerts()] + [v for rule in _alerts() for v in rule["annotations"].values()]
    used = {m for text in texts for m in re.findall(r"\bragmon_[a-z0-9_]+", text)}
    assert used and used <= exported, f"not in ragmon/telemetry/catalogue.py: {sorted(used - exported)}"


def test_chart_serves_a_copy_of_the_rules() -> None:
    copy = ROOT / "helm" / "ragmon" / "files" / "ragmon.rules.yaml"
    assert copy.read_bytes() == RULES.read_bytes(), "run scripts/sync-chart-rules and commit the result"


@pytest.fixture(scope="module")
def amtool() -> str:
    return binary("amtool", package="prometheus-alertmanager")


def test_amtool_check_config(amtool: str) -> None:
    result = subprocess.run([amtool, "check-config", str(AM_CONFIG)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout and " - 1 inhibit rules" in result.stdout, result.stdout
    assert f" - {len(RECEIVERS)} receivers" in result.stdout, result.stdout


@pytest.mark.parametrize("rule", _alerts(), ids=lambda r: r["alert"])
def test_each_alert_routes_to_the_receiver_of_its_severity(amtool: str, rule: dict) -> None:
    severity = rule["labels"]["severity"]
    result = subprocess.run([amtool, "config", "routes", "test", f"--config.file={AM_CONFIG}",
                             f"--verify.receivers={RECEIVERS[severity]}", f"alertname={rule['alert']}",
                             f"severity={severity}", "stratum=billing"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip() == RECEIVERS[severity]


def test_a_stalled_ingest_inhibits_the_alerts_computed_from_traces() -> None:
    """Every alert of the drift and quality groups (computed from the traces ingest stores) is muted while
    RagmonIngestStalled fires, except RagmonDriftCheckStale: it says the drift checks stopped, which a stall does
    not explain. A new drift or quality alert must be added to the inhibit rule (or here, with the reason)."""
    (rule,) = yaml.safe_load(AM_CONFIG.read_text())["inhibit_rules"]
    assert rule["source_matchers"] == ['alertname="RagmonIngestStalled"']
    (target,) = rule["target_matchers"]
    pattern = re.fullmatch(r'alertname=~"(.+)"', target)
    assert pattern, target
    groups = yaml.safe_load(RULES.read_text())["groups"]
    from_traces = {r["alert"] for g in groups if g["name"] in ("ragmon-drift", "ragmon-quality") for r in g["rules"]}
    inhibited = {r["alert"] for r in _alerts() if re.fullmatch(pattern[1], r["alert"])}  # Alertmanager anchors it
    assert inhibited == from_traces - {"RagmonDriftCheckStale"}
    assert set(pattern[1].split("|")) == inhibited  # names no alert that does not exist
    assert rule["equal"] == ["cluster"]
