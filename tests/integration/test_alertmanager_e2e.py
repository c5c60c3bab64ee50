"""The alert path to a receiver: a real ragmon process's /metrics, a real Prometheus evaluating
alerts/ragmon.rules.yaml, a real Alertmanager (Debian's prometheus-alertmanager) running alerts/alertmanager.yml,
and a webhook receiver here.

- The drift gauges come from the real drift checker (``DriftChecker.run_once`` over traces in chDB whose retrieval
  scores shifted by +0.3 in two strata), published on the telemetry of a process that ``build_process`` built with
  the review UI and console, served on loopback: the same /metrics, ``ragmon_links_info`` and console a daemon has.
  The console's runbook base points at a loopback server of alerts/runbooks, so the runbook link can be opened.
- Prometheus reads the rules with the ``for`` of the two alerts under test set to 0s (their real hold is 5 minutes;
  nothing else changed; the receiver checks that no other alert arrives) and evaluates every second. Alertmanager
  runs the example configuration with its three webhook URLs pointed at the receiver here and its waits shortened
  to 1 s (routes, grouping and inhibition unchanged).
- Case 1: each stratum's drift arrives as one notification on the ticket receiver, with its labels, summary, a
  runbook link that serves the runbook and a console link that opens the drift page of that group.
- Case 2: ingest stalls (the ingest gauges as a stuck consumer leaves them: nothing committed for an hour, lag);
  RagmonIngestStalled pages; then drift is found, and Alertmanager mutes it: its API shows the drift alerts
  inhibited by the stall, its log shows each stratum's drift group flushed twice, and the receiver never got them.
- Case 3 (Alertmanager alone, alerts posted as Prometheus posts them): a stall mutes the drift of its own
  ``cluster`` only.

Every wait polls for an event with a deadline; nothing sleeps and hopes.
"""

from __future__ import annotations

import functools
import http.server
import json
import re
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import timedelta
from html import unescape
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
import yaml

from ragmon.config import DriftSettings, Settings
from ragmon.drift.check.check import DriftChecker
from ragmon.pipeline.metrics import IngestMetrics
from ragmon.process import Process as RagmonProcess
from ragmon.process import build_process
from tests.integration.review.support import PASSWORDS, csrf_of, review_settings
from tests.integration.test_drift_check import NOW, _insert_traces
from tests.support.prometheus import ROOT, Process, binary, free_port, get_json, rules_with_hold, until

pytestmark = [pytest.mark.prometheus, pytest.mark.slow]

AM_CONFIG = ROOT / "alerts" / "alertmanager.yml"
RUNBOOKS = ROOT / "alerts" / "runbooks"
DRIFT = "RagmonRetrievalScoreDrift"
STALLED = "RagmonIngestStalled"
STRATA = ("billing", "support")
#: the Prometheus external label the example's inhibition compares (`equal: [cluster]`)
CLUSTER = "e2e"
#: a flush of a drift group in Alertmanager's debug log (the group's key is logged with escaped quotes)
FLUSH = re.compile(r'aggrGroup=".*?alertname=\\"RagmonRetrievalScoreDrift\\", stratum=\\"(\w+)\\"\}" msg=flushing')
ROLES = {"ingest": False, "otlp": False, "outcomes": False, "score": False, "drift": False, "shadow": False,
         "review": True}


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's signature
        pass


class Receiver:
    """A webhook receiver on loopback: records each notification (the path is the receiver's name) and lets a
    test wait for the ones it expects."""

    def __init__(self) -> None:
        self.notifications: list[tuple[str, dict[str, Any]]] = []
        self._changed = threading.Condition()
        receiver = self

        class Handler(_Quiet):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with receiver._changed:
                    receiver.notifications.append((self.path.lstrip("/"), body))
                    receiver._changed.notify_all()
                self.send_response(200)
                self.end_headers()

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def alerts(self, alertname: str) -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
        """(receiver, notification, alert) for every alert named ``alertname`` received so far."""
        with self._changed:
            return [(path, body, alert) for path, body in self.notifications for alert in body["alerts"]
                    if alert["labels"]["alertname"] == alertname]

    def wait(self, what: str, done: Callable[[], Any], timeout: float) -> Any:
        deadline = time.monotonic() + timeout
        with self._changed:
            while not (result := done()):
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}; received: "
                                         f"{json.dumps(self.notifications, indent=1)[-4000:]}")
                self._changed.wait(left)
        return result

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@dataclass
class Alertmanager:
    """The real Alertmanager running the example configuration, delivering to ``receiver``."""

    process: Process
    api: str
    receiver: Receiver

    def alerts(self, alertname: str) -> list[dict[str, Any]]:
        matcher = urllib.parse.quote(f'alertname="{alertname}"')
        return get_json(f"{self.api}/api/v2/alerts?filter={matcher}")

    def flushes(self) -> dict[str, int]:
        """How many times each stratum's drift group has been flushed (Alertmanager's debug log)."""
        groups = FLUSH.findall(self.process.log.read_text())
        return {s: groups.count(s) for s in set(groups)}

    def post(self, *alerts: dict[str, str]) -> None:
        """Firing alerts with these labels, as Prometheus sends them (``POST /api/v2/alerts``)."""
        now = time.time()
        body = json.dumps([{"labels": labels, "annotations": {}, "startsAt": _rfc3339(now),
                            "endsAt": _rfc3339(now + 3600)} for labels in alerts]).encode()
        request = urllib.request.Request(f"{self.api}/api/v2/alerts", data=body, method="POST",
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=5) as response:  # noqa: S310 - loopback
            assert response.status == 200


def _rfc3339(unix: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(unix))


@dataclass
class AlertPath:
    ragmon: RagmonProcess
    ragmon_url: str
    runbooks_url: str
    receiver: Receiver
    alertmanager: Alertmanager
    prom_api: str

    def find_drift(self) -> None:
        """Run the real drift checker on the process's store and telemetry: reference windows over 7 days, then a last
        hour whose retrieval scores are 0.3 higher, in each stratum."""
        store = self.ragmon.store
        rng = np.random.default_rng(7)
        for stratum in STRATA:
            for day in range(1, 8):
                _insert_traces(store, rng, n=300, start=NOW - timedelta(hours=1, days=day), seconds=3600,
                               stratum=stratum)
            _insert_traces(store, rng, n=1000, start=NOW - timedelta(hours=1), seconds=3600, stratum=stratum, shift=0.3)
        settings = DriftSettings(features=["top1_score", "mean_score", "top2_gap"])
        DriftChecker(store, settings, self.ragmon.telemetry, clock=lambda: NOW).run_once()

    def query(self, expr: str) -> list[dict[str, Any]]:
        return get_json(f"{self.prom_api}/api/v1/query?" + urllib.parse.urlencode({"query": expr}))["data"]["result"]


def _serve_runbooks() -> http.server.ThreadingHTTPServer:
    handler = functools.partial(_Quiet, directory=str(RUNBOOKS))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def _ready(process: Process, api: str) -> bool:
    return process.alive() and urllib.request.urlopen(f"{api}/-/ready", timeout=2).status == 200  # noqa: S310


@pytest.fixture
def alertmanager(tmp_path: Path) -> Iterator[Alertmanager]:
    """alerts/alertmanager.yml, its webhook URLs pointed at a receiver here and its waits shortened to 1 s; routes,
    grouping and inhibition as shipped."""
    binary_path = binary("prometheus-alertmanager", "alertmanager", package="prometheus-alertmanager")
    receiver = Receiver()
    try:
        config = yaml.safe_load(AM_CONFIG.read_text())
        for entry in config["receivers"]:
            for webhook in entry["webhook_configs"]:
                webhook["url"] = f"{receiver.url}/{entry['name']}"
        config["route"].update(group_wait="1s", group_interval="1s")
        (tmp_path / "alertmanager.yml").write_text(yaml.safe_dump(config))
        port = free_port()
        # --cluster.listen-address= : no gossip peer (and no port 9094) for a single test instance; debug logs the
        # flushes of each group
        process = Process([binary_path, f"--config.file={tmp_path / 'alertmanager.yml'}",
                           f"--storage.path={tmp_path / 'alertmanager'}", f"--web.listen-address=127.0.0.1:{port}",
                           "--cluster.listen-address=", "--log.level=debug"], None, tmp_path / "alertmanager.log")
        try:
            api = f"http://127.0.0.1:{port}"
            until("Alertmanager ready", lambda: _ready(process, api), 60)
            yield Alertmanager(process, api, receiver)
        finally:
            process.stop()
    finally:
        receiver.stop()


@pytest.fixture
def alert_path(tmp_path: Path, store: Any, alertmanager: Alertmanager) -> Iterator[AlertPath]:
    prometheus = binary("prometheus", package="prometheus")
    runbooks = _serve_runbooks()
    runbooks_url = f"http://127.0.0.1:{runbooks.server_address[1]}"
    ragmon_port, prom_port = free_port(), free_port()
    settings = Settings(roles=ROLES, review=review_settings(), console={"runbook_base_url": runbooks_url},
                        read_api={"enabled": False}, server={"host": "127.0.0.1", "port": ragmon_port})
    ragmon = build_process(settings, store=store)
    ragmon.serve()
    prom: Process | None = None
    try:
        # the two alerts under test fire at the first evaluation that sees their condition (their real hold is 5
        # minutes); every other alert keeps its hold, so RagmonMetricsAbsent (10m) does not fire before the first
        # scrape
        (tmp_path / "rules.yaml").write_text(yaml.safe_dump(rules_with_hold("0s", [DRIFT, STALLED])))
        am_target = urllib.parse.urlsplit(alertmanager.api).netloc
        (tmp_path / "prometheus.yml").write_text(yaml.safe_dump({
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s", "scrape_timeout": "1s",
                       "external_labels": {"cluster": CLUSTER}},
            "rule_files": [str(tmp_path / "rules.yaml")],
            "alerting": {"alertmanagers": [{"static_configs": [{"targets": [am_target]}]}]},
            "scrape_configs": [{"job_name": "ragmon", "static_configs": [{"targets": [f"127.0.0.1:{ragmon_port}"]}]}],
        }))
        prom_api = f"http://127.0.0.1:{prom_port}"
        prom = Process([prometheus, f"--config.file={tmp_path / 'prometheus.yml'}",
                        f"--storage.tsdb.path={tmp_path / 'tsdb'}", f"--web.listen-address=127.0.0.1:{prom_port}"],
                       None, tmp_path / "prometheus.log")
        until("Prometheus ready", lambda: _ready(prom, prom_api), 60)
        yield AlertPath(ragmon, f"http://127.0.0.1:{ragmon_port}", runbooks_url, alertmanager.receiver, alertmanager,
                        prom_api)
    finally:
        if prom is not None:
            prom.stop()
        ragmon.stop_server()
        runbooks.shutdown()
        runbooks.server_close()


def _signed_in(base_url: str) -> httpx.Client:
    client = httpx.Client(base_url=base_url, follow_redirects=False, timeout=10)
    token = csrf_of(client.get("/review/login").text)
    response = client.post("/review/login", data={"username": "alice", "password": PASSWORDS["alice"],
                                                  "csrf_token": token, "next": "/review/"})
    assert response.status_code == 303, response.text
    return client


def test_drift_reaches_the_ticket_receiver_grouped_by_stratum_with_its_links(alert_path: AlertPath) -> None:
    alert_path.find_drift()
    drifted = until("the drift gauges scraped", lambda: alert_path.query(
        'ragmon_drift_persistent{feature=~"top1_score|mean_score|top2_gap"} == 1'), 60)
    expected = {(s["metric"]["stratum"], s["metric"]["feature"]) for s in drifted}
    assert {stratum for stratum, _ in expected} == set(STRATA), expected  # the shift is found in both strata

    def delivered() -> bool:
        return {(a["labels"]["stratum"], a["labels"]["feature"]) for _, _, a in alert_path.receiver.alerts(DRIFT)} \
            >= expected

    alert_path.receiver.wait(f"{DRIFT} for {sorted(expected)} at the receiver", delivered, 60)

    console = _signed_in(alert_path.ragmon_url)
    for path, notification, alert in alert_path.receiver.alerts(DRIFT):
        labels = alert["labels"]
        stratum, feature = labels["stratum"], labels["feature"]
        # routed by severity: a warning opens a ticket
        assert path == notification["receiver"] == "ragmon-ticket"
        assert labels == {"alertname": DRIFT, "severity": "warning", "cluster": CLUSTER, "retriever": "hybrid@v1",
                          "variant": "production", "stratum": stratum, "feature": feature}
        # grouped by stratum: a notification holds one stratum's drift, whichever features and retrievers drifted
        assert notification["groupLabels"] == {"alertname": DRIFT, "stratum": stratum}
        assert {a["labels"]["stratum"] for a in notification["alerts"]} == {stratum}
        assert alert["status"] == "firing"
        annotations = alert["annotations"]
        assert annotations["summary"] == (f"Retrieval scores drifted: {feature} for hybrid@v1 (production, stratum "
                                          f"{stratum})")
        assert "ragmon drift report --html" in annotations["description"]

        # the runbook link: console.runbook_base_url (ragmon_links_info) + the alert's runbook, served
        assert annotations["runbook_url"] == f"{alert_path.runbooks_url}/{DRIFT}.md"
        with urllib.request.urlopen(annotations["runbook_url"], timeout=5) as response:  # noqa: S310 - loopback
            assert response.read().decode() == (RUNBOOKS / f"{DRIFT}.md").read_text()

        # the console link: ragmon's own address (console.public_url unset), the group's incident page
        url = urllib.parse.urlsplit(annotations["dashboard_url"])
        assert f"{url.scheme}://{url.netloc}{url.path}" == f"{alert_path.ragmon_url}/review/console/incident"
        query = urllib.parse.parse_qs(url.query)
        assert query == {"retriever": ["hybrid@v1"], "variant": ["production"], "stratum": [stratum],
                         "feature": [feature]}
        page = console.get(f"{url.path}?{url.query}")
        assert page.status_code == 200, page.text[:500]
        heading = unescape(page.text.split("<h1>")[1].split("</h1>")[0])
        assert f"Incident: {feature}" in heading and f"stratum {stratum}" in heading, heading  # this group's
        assert "PERSISTENT drift" in page.text, page.text[:2000]  # the check that fired

    # one notification per stratum (more only if a stratum's features reached Alertmanager in separate evaluations)
    groups = {json.dumps(n["groupLabels"], sort_keys=True) for _, n, _ in alert_path.receiver.alerts(DRIFT)}
    assert groups == {json.dumps({"alertname": DRIFT, "stratum": s}, sort_keys=True) for s in STRATA}
    assert {a["labels"]["alertname"] for _, n in alert_path.receiver.notifications for a in n["alerts"]} == {DRIFT}


def test_a_stalled_ingest_pages_and_inhibits_the_drift_alerts(alert_path: AlertPath) -> None:
    # what a stuck ingest loop leaves in its gauges: nothing committed for an hour, messages waiting
    # the trace loop's gauges, registered here (this process runs no ingest role), as a stuck loop leaves them
    ingest = alert_path.ragmon.telemetry.use(IngestMetrics)
    ingest.ingest_commit_current.labels(loop="ingest").set(time.time() - 3600)
    ingest.ingest_consumer_lag.labels(topic="ragmon.traces", partition="0").set(250)
    _, page, stalled = alert_path.receiver.wait(f"{STALLED} at the page receiver",
                                                lambda: alert_path.receiver.alerts(STALLED), 60)[0]
    assert page["receiver"] == "ragmon-page"  # critical pages
    assert stalled["labels"]["severity"] == "critical" and stalled["labels"]["cluster"] == CLUSTER
    instance = stalled["labels"]["instance"]
    assert stalled["annotations"]["summary"] == \
        f"Ingest on {instance} has committed nothing for 10 minutes while messages wait"
    assert stalled["annotations"]["runbook_url"] == f"{alert_path.runbooks_url}/{STALLED}.md"
    assert stalled["annotations"]["dashboard_url"] == f"{alert_path.ragmon_url}/review/console/traces?since=1h"

    # now the drift: firing in Prometheus, received by Alertmanager, and muted there by the stall
    alert_path.find_drift()
    firing = until(f"{DRIFT} firing in Prometheus", lambda: [
        a for a in get_json(f"{alert_path.prom_api}/api/v1/alerts")["data"]["alerts"]
        if a["labels"]["alertname"] == DRIFT and a["state"] == "firing"], 60)
    assert {a["labels"]["stratum"] for a in firing} == set(STRATA)
    am = alert_path.alertmanager
    stalled_fingerprint = until(f"{STALLED} in Alertmanager", lambda: am.alerts(STALLED), 30)[0]["fingerprint"]

    def inhibited() -> list[dict[str, Any]]:
        alerts = am.alerts(DRIFT)
        strata = {a["labels"]["stratum"] for a in alerts}
        return alerts if strata == set(STRATA) and all(a["status"]["state"] == "suppressed" for a in alerts) else []

    drift = until(f"{DRIFT} suppressed in Alertmanager", inhibited, 30)
    assert all(a["status"]["inhibitedBy"] == [stalled_fingerprint] for a in drift), drift

    # each stratum's drift group is flushed when its notification is due (group_wait, then every group_interval):
    # Alertmanager logs each flush at debug level. A group's flushes run one after the other, so once its second
    # flush is logged its first has gone through the pipeline, inhibition included, and sent nothing
    until("each stratum's drift group flushed twice (Alertmanager's log)", lambda: am.process.alive()
          and all(am.flushes().get(s, 0) >= 2 for s in STRATA), 30)
    assert {a["labels"]["alertname"] for _, n in alert_path.receiver.notifications for a in n["alerts"]} == {STALLED}


def test_a_stall_inhibits_drift_of_its_own_deployment_only(alertmanager: Alertmanager) -> None:
    """The inhibit rule's ``equal: [cluster]``: a stall mutes drift that carries the same ``cluster`` (or, like the
    stall, none), never drift of another deployment. The alerts are posted as Prometheus posts them."""
    drift = {"alertname": DRIFT, "severity": "warning", "retriever": "hybrid@v1", "variant": "production",
             "feature": "top1_score"}
    alertmanager.post({"alertname": STALLED, "severity": "critical", "instance": "ragmon-eu:9108", "cluster": "eu"},
                      {"alertname": STALLED, "severity": "critical", "instance": "ragmon:9108"})
    until(f"both {STALLED} in Alertmanager", lambda: len(alertmanager.alerts(STALLED)) == 2, 30)
    alertmanager.post({**drift, "stratum": "billing", "cluster": "eu"},   # the stalled deployment's: muted
                      {**drift, "stratum": "support", "cluster": "us"},   # another deployment's: delivered
                      {**drift, "stratum": "search"})                     # no cluster, like one of the stalls: muted
    delivered = alertmanager.receiver.wait(f"{DRIFT} of cluster us at the receiver",
                                           lambda: alertmanager.receiver.alerts(DRIFT), 30)
    assert [(path, alert["labels"]["stratum"], alert["labels"].get("cluster")) for path, _, alert in delivered] == \
        [("ragmon-ticket", "support", "us")]
    state = {a["labels"]["stratum"]: a["status"] for a in alertmanager.alerts(DRIFT)}
    stalls = {a["labels"].get("cluster"): a["fingerprint"] for a in alertmanager.alerts(STALLED)}
    assert state["support"]["state"] == "active"
    assert state["billing"]["state"] == "suppressed" and state["billing"]["inhibitedBy"] == [stalls["eu"]]
    assert state["search"]["state"] == "suppressed" and state["search"]["inhibitedBy"] == [stalls[None]]
    until("the muted drift groups flushed twice (Alertmanager's log)", lambda: alertmanager.process.alive()
          and all(alertmanager.flushes().get(s, 0) >= 2 for s in ("billing", "search")), 30)
    assert [a["labels"]["stratum"] for _, _, a in alertmanager.receiver.alerts(DRIFT)] == ["support"]
