"""Every read command on-call runs, against a running daemon, and then every role still writes (issue 30, defect 1).

The defect: after `ragmon store status` (or any read command) reached a running `ragmon run` through its read API,
the daemon's own writes failed until a restart (review labels and sign-out 503, OTLP traces accepted and never
stored, /readyz "writes failing … READONLY"): the API's per-query ``readonly = 1`` stuck to the embedded engine's
shared connection. Here a real `ragmon run` (the demo's data, the review UI, the OTLP/HTTP receiver and the drift
role) is signed in to by a reviewer over real HTTP; every read command of the runbooks and of the read-command
list runs against it as its own process; then a review label, a triage label, an OTLP trace, a drift check and a
sign-out (which must end a copied session cookie) are each written and read back, and /readyz stays ready.
Kafka's roles (ingest, score) write through the same store connection; the system test (tests/system/) runs them
all together.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import yaml

from ragmon.review.auth import hash_password
from tests.support.otel_spans import otlp_messages, rag_spans
from tests.support.runbooks import read_commands, runbook_reads

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
PASSWORD = "a-long-reviewer-password"
ANNOUNCE = "ragmon-read-api.json"
#: a read command's answer (docs/cli.md): 0 done, 1 a verdict of reject, 4 a verdict of hold; 2, 3 and 5 are failures
ANSWERED = {0, 1, 4}


@dataclass
class Daemon:
    config: Path
    data: Path
    base: str
    otlp: str
    proc: subprocess.Popen[str]
    tmp: Path

    def read(self, sql: str, **parameters: object) -> list[list[object]]:
        announced = json.loads((self.data / ANNOUNCE).read_text())
        answer = httpx.post(f"{announced['url']}/api/v1/store/read", timeout=30,
                            headers={"Authorization": f"Bearer {announced['token']}"},
                            json={"op": "query", "sql": sql, "parameters": parameters})
        assert answer.status_code == 200, answer.text
        return answer.json()["rows"]


def _ragmon(daemon: Daemon, *args: str) -> subprocess.CompletedProcess[str]:
    # `drift backtest --from 14d` (the runbook's tuning step) replays 336 checks: about 2 minutes on this data
    # with an idle machine, more on a loaded one
    return subprocess.run([sys.executable, "-m", "ragmon", "--config", str(daemon.config), *args],
                          capture_output=True, text=True, timeout=900, cwd=daemon.tmp,
                          env=dict(os.environ, COLUMNS="200", PYTHONPATH=str(ROOT)))


def _metric(base: str, name: str) -> float:
    text = httpx.get(f"{base}/metrics", timeout=10).text
    return sum(float(m.group(1)) for m in re.finditer(rf"^{name}(?:{{[^}}]*}})? (\S+)$", text, re.MULTILINE))


def _eventually(what: str, check: Callable[[], bool], seconds: float = 90) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, f"not within {seconds:g} s: {what}"
        time.sleep(0.3)


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    tmp = tmp_path_factory.mktemp("writes")
    data = tmp / "demo"
    demo = subprocess.run([sys.executable, "-m", "ragmon", "demo", "--queries", "400", "--dir", str(data)],
                          capture_output=True, text=True, timeout=600)
    assert demo.returncode == 0, demo.stdout + demo.stderr
    config = tmp / "ragmon.yaml"
    config.write_text(yaml.safe_dump({
        "store": {"dsn": f"chdb://{data}", "database": "ragmon_demo"},
        "server": {"port": 0},
        "otlp": {"port": 0, "dead_letters": str(tmp / "otlp-dead-letters.jsonl")},
        "drift": {"interval_seconds": 5},
        "review": {"users": [{"username": "alice", "password_hash": hash_password(PASSWORD)}],
                   "session_secret": "s" * 64},
        "roles": {"ingest": False, "otlp": True, "score": False, "drift": True, "review": True, "shadow": False,
                  "outcomes": False},
    }))
    proc = subprocess.Popen([sys.executable, "-m", "ragmon", "--config", str(config), "run"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert proc.stdout is not None
    seen: list[str] = []
    base = otlp = None
    while base is None:
        line = proc.stdout.readline()
        assert line, "ragmon run did not start:\n" + "".join(seen)
        seen.append(line)
        found = re.search(r"metrics (http://[\d.]+:\d+)/metrics", line)
        base = found.group(1) if found else None
        posted = re.search(r"OTLP/HTTP (http://[\d.]+:\d+/v1/traces)", line)
        otlp = posted.group(1) if posted else otlp
    assert otlp is not None, "".join(seen)
    _eventually("a first drift check", lambda: _metric(base, "ragmon_drift_checks_total") >= 1, 180)
    yield Daemon(config, data, base, otlp, proc, tmp)
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=60)


def _sign_in(base: str) -> httpx.Client:
    client = httpx.Client(base_url=base, timeout=30, follow_redirects=False)
    form = client.get("/review/login")
    csrf = re.search(r'name="csrf_token" value="([^"]+)"', form.text).group(1)  # type: ignore[union-attr]
    signed = client.post("/review/login", data={"username": "alice", "password": PASSWORD, "csrf_token": csrf,
                                                "next": "/review/"})
    assert signed.status_code == 303, signed.text
    return client


def test_every_role_still_writes_after_every_read_command(daemon: Daemon) -> None:
    reviewer = _sign_in(daemon.base)
    copied_cookie = dict(reviewer.cookies)
    reads = [shlex.split(c)[1:] for c in runbook_reads()] + read_commands(daemon.tmp)
    assert ["store", "status"] in reads and len(reads) > 20
    for args in reads:
        result = _ragmon(daemon, *args)
        out = result.stdout + result.stderr
        assert result.returncode in ANSWERED and "Traceback" not in out and "error:" not in out, (args, out)
    assert httpx.get(f"{daemon.base}/readyz", timeout=10).status_code == 200

    # a review label, through the JSON API with the browser session (as the page's script sends it)
    [week] = [w["week"] for w in reviewer.get("/review/api/v1/weeks").json()["weeks"]][-1:]
    items = reviewer.get(f"/review/api/v1/weeks/{week}/queue").json()["items"]
    trace_id = items[0]["trace_id"]
    csrf = re.search(r'name="csrf_token" value="([^"]+)"', reviewer.get(f"/review/weeks/{week}").text).group(1)  # type: ignore[union-attr]
    label = {"answer_correct": True, "grounded": True, "citations_supported": None, "refusal_appropriate": None,
             "expected_behaviour": "answer", "note": "after the read commands"}
    saved = reviewer.put(f"/review/api/v1/weeks/{week}/items/{trace_id}/label", json=label,
                         headers={"X-CSRF-Token": csrf})
    assert saved.status_code == 200, saved.text
    assert daemon.read("SELECT count() FROM ragmon_demo.review_labels FINAL WHERE trace_id = {t:String} "
                       "AND reviewer = 'alice'", t=trace_id) == [[1]]

    # a triage label on the demo's thumbs-down queue
    triage = reviewer.get("/review/api/v1/triage/weeks").json()["weeks"]
    triage_week = next(w["week"] for w in triage if w["queued"] > 0)
    queued = reviewer.get(f"/review/api/v1/triage/weeks/{triage_week}/queue").json()["items"][0]["trace_id"]
    cause = reviewer.put(f"/review/api/v1/triage/weeks/{triage_week}/items/{queued}/label",
                         json={"cause": "retrieval_miss", "note": ""}, headers={"X-CSRF-Token": csrf})
    assert cause.status_code == 200, cause.text
    assert daemon.read("SELECT count() FROM ragmon_demo.triage_labels FINAL WHERE trace_id = {t:String}",
                       t=queued) == [[1]]

    # an OTLP trace, posted as an application's exporter does, stored
    [body] = otlp_messages(rag_spans(1, prefix="after-reads-"), 10, "proto")
    posted = httpx.post(daemon.otlp, content=body, headers={"Content-Type": "application/x-protobuf"}, timeout=30)
    assert posted.status_code == 200, posted.text
    _eventually("the OTLP trace stored", lambda: daemon.read(
        "SELECT count() FROM ragmon_demo.traces FINAL WHERE query_id = 'after-reads-0'") == [[1]])

    # the drift role's next check is stored
    checks = _metric(daemon.base, "ragmon_drift_checks_total")
    stored = daemon.read("SELECT count(DISTINCT check_id) FROM ragmon_demo.drift_checks")[0][0]
    _eventually("another drift check stored", lambda: daemon.read(
        "SELECT count(DISTINCT check_id) FROM ragmon_demo.drift_checks")[0][0] > stored, 120)
    assert _metric(daemon.base, "ragmon_drift_checks_total") > checks

    # sign-out ends the session everywhere: a copy of the cookie no longer opens a page
    out = reviewer.post("/review/logout", data={"csrf_token": csrf})
    assert out.status_code == 303 and out.headers["location"] == "/review/login"
    copy = httpx.get(f"{daemon.base}/review/", cookies=copied_cookie, timeout=30, follow_redirects=False)
    assert copy.status_code == 303 and copy.headers["location"].startswith("/review/login")

    ready = httpx.get(f"{daemon.base}/readyz", timeout=10)
    assert ready.status_code == 200 and "READONLY" not in ready.text, ready.text
    assert daemon.proc.poll() is None
