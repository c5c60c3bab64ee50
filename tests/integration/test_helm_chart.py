"""The Helm chart: `helm lint --strict`, `helm template` over several values files, and the invariants of
what it renders (a Deployment per role, probes, non-root read-only pods, secrets only by reference, HPA for
ingest and score, one drift replica, rules copied from alerts/)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.support.missing import missing

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "helm" / "ragmon"
VALUES = [None, ROOT / "helm/ci/minimal-values.yaml", ROOT / "helm/ci/production-values.yaml"]


def _helm() -> str:
    found = shutil.which("helm") or next(
        (str(p) for p in (Path.home() / "go/bin/helm", Path("/usr/local/bin/helm")) if p.exists()), None
    )
    if found is None:
        missing("helm is not installed; scripts/setup-system installs it with `go install`")
    return found


def _render(values: Path | None) -> list[dict]:
    args = [_helm(), "template", "rel", str(CHART)] + (["-f", str(values)] if values else [])
    out = subprocess.run(args, check=True, capture_output=True, text=True).stdout
    return [doc for doc in yaml.safe_load_all(out) if doc]


@pytest.mark.parametrize("values", VALUES, ids=lambda v: v.name if v else "defaults")
def test_helm_lint_strict(values: Path | None) -> None:
    args = [_helm(), "lint", "--strict", str(CHART)] + (["-f", str(values)] if values else [])
    result = subprocess.run(args, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("values", VALUES, ids=lambda v: v.name if v else "defaults")
def test_rendered_manifest_invariants(values: Path | None) -> None:
    docs = _render(values)
    spec = yaml.safe_load(values.read_text()) if values else {}
    deployments = {d["metadata"]["labels"]["app.kubernetes.io/component"]: d for d in docs if d["kind"] == "Deployment"}
    enabled = {
        role for role in ("ingest", "score", "drift", "review")
        if spec.get("roles", {}).get(role, {}).get("enabled", True)
    }
    assert set(deployments) == enabled
    for role, dep in deployments.items():
        pod = dep["spec"]["template"]["spec"]
        assert pod["securityContext"]["runAsNonRoot"] is True
        (container,) = pod["containers"]
        assert container["args"] == ["run"]
        assert container["securityContext"]["readOnlyRootFilesystem"] is True
        assert container["securityContext"]["allowPrivilegeEscalation"] is False
        assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
        assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
        env = {e["name"]: e for e in container["env"]}
        for other in ("ingest", "score", "drift", "review"):
            assert env[f"RAGMON_ROLES__{other.upper()}"]["value"] == str(other == role).lower()
        assert env["RAGMON_ROLES__SHADOW"]["value"] == str(role == "drift").lower()  # once, not in every pod
        for beside_drift in ("JUDGE_AGREEMENT", "COVERAGE"):  # once, where they ran inside the drift role
            assert env[f"RAGMON_ROLES__{beside_drift}"]["value"] == str(role == "drift").lower()
        assert env["RAGMON_ROLES__OTLP"]["value"] == "false"  # no stray OTLP/HTTP port: traces come through Kafka
        outcomes = role == "ingest" and spec.get("roles", {}).get("ingest", {}).get("outcomes", False)
        assert env["RAGMON_ROLES__OUTCOMES"]["value"] == str(outcomes).lower()  # beside the traces, if switched on
        for name, entry in env.items():
            # secrets only by reference: nothing that looks like a credential is inline
            if any(word in name for word in ("DSN", "PASSWORD", "KEY", "TOKEN", "SECRET")):
                assert "valueFrom" in entry and "value" not in entry, name
        assert "resources" in container
    if "drift" in deployments:
        assert deployments["drift"]["spec"]["replicas"] == 1
    hpas = {d["spec"]["scaleTargetRef"]["name"] for d in docs if d["kind"] == "HorizontalPodAutoscaler"}
    assert hpas <= {f"rel-ragmon-{r}" for r in ("ingest", "score")}
    for role in ("ingest", "score"):
        scaled = spec.get("roles", {}).get(role, {}).get("autoscaling", {}).get("enabled", True)
        if role in deployments:
            assert (f"rel-ragmon-{role}" in hpas) == scaled
            assert ("replicas" in deployments[role]["spec"]) == (not scaled)
    assert any(d["kind"] == "ConfigMap" for d in docs)
    assert not any(d["kind"] == "Secret" for d in docs), "the chart must reference Secrets, never create them"
    kinds = {d["kind"] for d in docs}
    monitoring = spec.get("serviceMonitor", {}).get("enabled", False)
    assert ("ServiceMonitor" in kinds) == monitoring
    if monitoring:  # every pod scraped once: the selector picks exactly one Service
        (monitor,) = (d for d in docs if d["kind"] == "ServiceMonitor")
        wanted = monitor["spec"]["selector"]["matchLabels"].items()
        services = [d for d in docs if d["kind"] == "Service" and wanted <= d["metadata"]["labels"].items()]
        assert [s["metadata"]["name"] for s in services] == ["rel-ragmon"]
    assert ("PrometheusRule" in kinds) == spec.get("prometheusRule", {}).get("enabled", False)
    for rule in (d for d in docs if d["kind"] == "PrometheusRule"):
        source = yaml.safe_load((ROOT / "alerts/ragmon.rules.yaml").read_text())
        assert rule["spec"]["groups"] == source["groups"]


def test_chart_rules_are_a_copy_of_alerts() -> None:
    source = ROOT / "alerts" / "ragmon.rules.yaml"
    copy = CHART / "files" / "ragmon.rules.yaml"
    assert copy.read_bytes() == source.read_bytes(), "run scripts/sync-chart-rules and commit the result"


def test_values_schema_rejects_inline_dsn() -> None:
    bad = ROOT / "helm/ci/minimal-values.yaml"
    args = [_helm(), "template", "rel", str(CHART), "-f", str(bad), "--set", "config.store.dsn=http://u:pw@h/db"]
    result = subprocess.run(args, capture_output=True, text=True)
    assert result.returncode != 0
    assert "/config/store" in result.stderr
