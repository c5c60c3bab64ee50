"""End to end with a real Prometheus (Debian's package) scraping a real ``ragmon drift`` process on loopback.

1. Synthetic traffic without drift goes into a fresh chDB directory (``ragmon drift simulate``).
2. Prometheus loads alerts/ragmon.rules.yaml (the hold time of RagmonRetrievalScoreDrift shortened from 65m
   to 10s, nothing else changed), scrapes ``ragmon drift`` every second: the drift gauges arrive, no alert.
3. ragmon stops; a shift of +0.3 in retrieval scores is injected into the last hour; ragmon starts again,
   its first check finds the drift, and Prometheus's own HTTP API shows the alert pending, then firing.

Every wait polls with a deadline; nothing sleeps and hopes.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.missing import missing

ROOT = Path(__file__).resolve().parents[2]
#: the ragmon console entry point, run with this interpreter
RAGMON = [sys.executable, "-c", "from ragmon.cli.app import main; main()"]
ALERT = "RagmonRetrievalScoreDrift"

pytestmark = [pytest.mark.prometheus, pytest.mark.slow]


def _binary(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        message = f"{name} not found; install Debian's prometheus package (apt-get install -y prometheus)"
        missing(message)
    return path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=5) as response:  # noqa: S310 - loopback URLs built by the test
        return json.loads(response.read())


def _until(what: str, probe: Callable[[], Any], timeout: float, *, every: float = 0.2) -> Any:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = probe()
        except (urllib.error.URLError, ConnectionError, TimeoutError, json.JSONDecodeError) as exc:
            last = exc
        else:
            if last:
                return last
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}; last: {last!r}")


def _ragmon(*args: str, env: dict[str, str], timeout: float = 120) -> str:
    result = subprocess.run([*RAGMON, *args], env=env, capture_output=True,
                            text=True, timeout=timeout)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


class Process:
    def __init__(self, args: list[str], env: dict[str, str] | None, log: Path):
        self.log = log
        self._file = log.open("wb")
        self.proc = subprocess.Popen(args, env=env, stdout=self._file, stderr=subprocess.STDOUT)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self._file.close()

    def alive(self) -> bool:
        if self.proc.poll() is not None:
            raise AssertionError(f"{self.proc.args[0]} exited with {self.proc.returncode}:\n{self.log.read_text()[-3000:]}")
        return True


@pytest.fixture
def processes() -> Iterator[list[Process]]:
    started: list[Process] = []
    yield started
    for p in reversed(started):
        p.stop()


def test_drift_alert_goes_pending_then_firing(tmp_path: Path, processes: list[Process]) -> None:
    prometheus = _binary("prometheus")
    ragmon_port, prom_port = _free_port(), _free_port()
    env = {**os.environ, "RAGMON_STORE__DSN": f"chdb://{tmp_path / 'chdb'}", "RAGMON_SERVER__HOST": "127.0.0.1",
           "RAGMON_SERVER__PORT": str(ragmon_port), "RAGMON_DRIFT__INTERVAL_SECONDS": "5",
           "RAGMON_DRIFT__FEATURES": '["top1_score","mean_score","top2_gap"]'}
    env.pop("RAGMON_CONFIG", None)
    _ragmon("drift", "simulate", "--reference-per-day", "300", "--current", "900", "--strata", "billing", env=env)

    rules = yaml.safe_load((ROOT / "alerts" / "ragmon.rules.yaml").read_text())
    for group in rules["groups"]:
        for rule in group["rules"]:
            if rule.get("alert") == ALERT:
                rule["for"] = "10s"
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(rules))
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
    _until("Prometheus ready", lambda: prom.alive() and urllib.request.urlopen(f"{api}/-/ready", timeout=2).status == 200,
           60)

    def query(expr: str) -> list[dict[str, Any]]:
        return _get_json(f"{api}/api/v1/query?" + urllib.parse.urlencode({"query": expr}))["data"]["result"]

    def alert_states() -> dict[str, str]:
        alerts = _get_json(f"{api}/api/v1/alerts")["data"]["alerts"]
        return {a["labels"]["stratum"]: a["state"] for a in alerts if a["labels"].get("alertname") == ALERT}

    cmd = [*RAGMON, "drift"]
    ragmon = Process(cmd, env, tmp_path / "ragmon-1.log")
    processes.append(ragmon)
    # no drift yet: the gauges arrive through the scrape, all 0, and the alert stays inactive
    series = _until("drift gauges scraped", lambda: ragmon.alive() and query(
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
    pending = _until("the alert pending", lambda: ragmon.alive() and alert_states().get("billing") == "pending", 90)
    assert pending
    detected = query('ragmon_drift_detected{feature="top1_score",stratum="billing",test="window_mean"}')
    assert detected and detected[0]["value"][1] == "1"
    persistent = query('ragmon_drift_persistent{feature="top1_score",stratum="billing"}')
    assert persistent and persistent[0]["value"][1] == "1"
    _until("the alert firing", lambda: ragmon.alive() and alert_states().get("billing") == "firing", 60)
    alert = next(a for a in _get_json(f"{api}/api/v1/alerts")["data"]["alerts"] if a["labels"]["alertname"] == ALERT)
    assert alert["labels"]["severity"] == "warning" and alert["labels"]["retriever"] == "hybrid@v1"
    assert alert["annotations"]["runbook_url"].endswith(f"alerts/runbooks/{ALERT}.md")
