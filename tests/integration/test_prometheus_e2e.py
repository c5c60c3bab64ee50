"""End to end with a real Prometheus (Debian's package) scraping a real ``ragmon drift`` process on loopback.

1. Synthetic traffic without drift goes into a fresh chDB directory (``ragmon drift simulate``).
2. Prometheus loads alerts/ragmon.rules.yaml (the hold time of RagmonRetrievalScoreDrift shortened from 5m
   to 10s, nothing else changed), scrapes ``ragmon drift`` every second: the drift gauges arrive, no alert.
3. ragmon stops; a shift of +0.3 in retrieval scores is injected into the last hour; ragmon starts again,
   its first check finds the drift, and Prometheus's own HTTP API shows the alert pending, then firing.

Every wait polls with a deadline; nothing sleeps and hopes.
"""

from __future__ import annotations

import os
import subprocess
import sys
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.prometheus import Process, binary, free_port, get_json, rules_with_hold, until

#: the ragmon console entry point, run with this interpreter
RAGMON = [sys.executable, "-c", "from ragmon.cli.app import main; main()"]
ALERT = "RagmonRetrievalScoreDrift"

pytestmark = [pytest.mark.prometheus, pytest.mark.slow]


def _ragmon(*args: str, env: dict[str, str], timeout: float = 120) -> str:
    result = subprocess.run([*RAGMON, *args], env=env, capture_output=True,
                            text=True, timeout=timeout)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


@pytest.fixture
def processes() -> Iterator[list[Process]]:
    started: list[Process] = []
    yield started
    for p in reversed(started):
        p.stop()


def test_drift_alert_goes_pending_then_firing(tmp_path: Path, processes: list[Process]) -> None:
    prometheus = binary("prometheus", package="prometheus")
    ragmon_port, prom_port = free_port(), free_port()
    env = {**os.environ, "RAGMON_STORE__DSN": f"chdb://{tmp_path / 'chdb'}", "RAGMON_SERVER__HOST": "127.0.0.1",
           "RAGMON_SERVER__PORT": str(ragmon_port), "RAGMON_DRIFT__INTERVAL_SECONDS": "5",
           "RAGMON_DRIFT__FEATURES": '["top1_score","mean_score","top2_gap"]'}
    env.pop("RAGMON_CONFIG", None)
    _ragmon("drift", "simulate", "--reference-per-day", "300", "--current", "900", "--strata", "billing", env=env)

    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(rules_with_hold("10s", [ALERT])))
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump({
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s", "scrape_timeout": "1s"},
        "rule_files": [str(tmp_path / "rules.yaml")],
        "scrape_configs": [{"job_name": "ragmon", "static_configs": [{"targets": [f"127.0.0.1:{ragmon_port}"]}]}],
    }))
    api = f"http://127.0.0.1:{prom_port}"
    prom = Process([prometheus, f"--config.file={tmp_path / 'prometheus.yml'}",
                    f"--storage.tsdb.path={tmp_path / 'tsdb'}", f"--web.listen-address=127.0.0.1:{prom_port}"],
                   None, tmp_path / "prometheus.log")
    processes.append(prom)
    until("Prometheus ready",
          lambda: prom.alive() and urllib.request.urlopen(f"{api}/-/ready", timeout=2).status == 200,
           60)

    def query(expr: str) -> list[dict[str, Any]]:
        return get_json(f"{api}/api/v1/query?" + urllib.parse.urlencode({"query": expr}))["data"]["result"]

    def alert_states() -> dict[str, str]:
        alerts = get_json(f"{api}/api/v1/alerts")["data"]["alerts"]
        return {a["labels"]["stratum"]: a["state"] for a in alerts if a["labels"].get("alertname") == ALERT}

    cmd = [*RAGMON, "drift"]
    ragmon = Process(cmd, env, tmp_path / "ragmon-1.log")
    processes.append(ragmon)
    # no drift yet: the gauges arrive through the scrape, all 0, and the alert stays inactive
    series = until("drift gauges scraped", lambda: ragmon.alive() and query(
        'ragmon_drift_detected{job="ragmon",feature="top1_score",stratum="billing"}'), 90)
    assert {s["metric"]["test"]: s["value"][1] for s in series} == {"window_mean": "0", "window_quantiles": "0"}
    persistent = query('ragmon_drift_persistent{job="ragmon",feature="top1_score",stratum="billing"}')
    assert [s["value"][1] for s in persistent] == ["0"]
    assert query("ragmon_build_info")
    assert alert_states() == {}
    ragmon.stop()

    # inject the shift: most of the last hour's traffic now scores 0.3 higher
    _ragmon("drift", "simulate", "--reference-per-day", "0", "--current", "3000", "--shift", "0.3",
            "--strata", "billing", env=env)
    ragmon = Process(cmd, env, tmp_path / "ragmon-2.log")
    processes.append(ragmon)
    pending = until("the alert pending", lambda: ragmon.alive() and alert_states().get("billing") == "pending", 90)
    assert pending
    detected = query('ragmon_drift_detected{feature="top1_score",stratum="billing",test="window_mean"}')
    assert detected and detected[0]["value"][1] == "1"
    persistent = query('ragmon_drift_persistent{feature="top1_score",stratum="billing"}')
    assert persistent and persistent[0]["value"][1] == "1"
    until("the alert firing", lambda: ragmon.alive() and alert_states().get("billing") == "firing", 60)
    alert = next(a for a in get_json(f"{api}/api/v1/alerts")["data"]["alerts"] if a["labels"]["alertname"] == ALERT)
    assert alert["labels"]["severity"] == "warning" and alert["labels"]["retriever"] == "hybrid@v1"
    # console.runbook_base_url unset: the runbooks ragmon serves itself (issue 32)
    assert alert["annotations"]["runbook_url"].endswith(f"/review/console/runbooks/{ALERT}.md")
    assert "ragmon drift explain" in alert["annotations"]["hint"]
