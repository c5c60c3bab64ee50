"""Read commands while a real `ragmon run` holds the embedded store (issue 19, part 2).

The demo's data (a real chDB directory) is served by `ragmon run` in a subprocess. Every read command, and every
`ragmon …` command the alert runbooks tell on-call to run, works against the same config while it runs, through
the daemon's read API; each prints exactly what it prints locally once the daemon has stopped. A missing or wrong
token, and hostile requests to the API, get clear refusals and never write.
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
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import yaml

from tests.support.runbooks import read_commands, runbook_commands, runbook_reads

pytestmark = pytest.mark.slow

ANNOUNCE = "ragmon-read-api.json"


@dataclass
class Daemon:
    config: Path
    data: Path
    base: str
    proc: subprocess.Popen[str]
    tmp: Path


def _ragmon(config: Path, *args: str, env: dict[str, str] | None = None,
            cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ragmon", "--config", str(config), *args], capture_output=True,
                          text=True, timeout=900, cwd=cwd,
                          env=dict(os.environ, COLUMNS="300", PYTHONPATH=str(Path(__file__).resolve().parents[2]),
                                   **(env or {})))


def _metric(base: str, name: str) -> float:
    text = httpx.get(f"{base}/metrics", timeout=10).text
    return sum(float(m.group(1)) for m in re.finditer(rf"^{name}(?:{{[^}}]*}})? (\S+)$", text, re.MULTILINE))


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    tmp = tmp_path_factory.mktemp("reads")
    data = tmp / "demo"
    demo = subprocess.run([sys.executable, "-m", "ragmon", "demo", "--queries", "1200", "--dir", str(data)],
                          capture_output=True, text=True, timeout=600)
    assert demo.returncode == 0, demo.stdout + demo.stderr
    config = tmp / "ragmon.yaml"
    config.write_text(yaml.safe_dump({
        "store": {"dsn": f"chdb://{data}", "database": "ragmon_demo"},
        "server": {"port": 0},
        "drift": {"interval_seconds": 3600},
        "roles": {"ingest": False, "otlp": False, "score": False, "drift": True, "review": False, "shadow": False},
    }))
    proc = subprocess.Popen([sys.executable, "-m", "ragmon", "--config", str(config), "run"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert proc.stdout is not None
    seen: list[str] = []
    base = None
    while base is None:
        line = proc.stdout.readline()
        assert line, "ragmon run did not start:\n" + "".join(seen)
        seen.append(line)
        found = re.search(r"metrics (http://[\d.]+:\d+)/metrics", line)
        base = found.group(1) if found else None
    deadline = time.monotonic() + 120
    while _metric(base, "ragmon_drift_checks_total") < 1:  # its first check stored: nothing it writes changes later
        assert time.monotonic() < deadline, "no drift check"
        time.sleep(0.5)
    assert (data / ANNOUNCE).stat().st_mode & 0o077 == 0  # the token is its owner's only
    running = Daemon(config, data, base, proc, tmp)
    yield running
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=60)


def _same(text: str) -> str:
    """Output without what differs between two runs of one command: how long it took, and the random id of a
    check evaluated as of a past time (not stored)."""
    return re.sub(r"\d+\.\d+s\b|\"duration_seconds\": [\d.e-]+|\"check_id\": \"[0-9a-f]+\"", "…", text)


def test_runbook_commands_work_while_the_daemon_runs(daemon: Daemon) -> None:
    assert "ragmon drift report --html drift.html" in runbook_commands()  # the page that started issue 19
    ran = []
    for command in runbook_reads():
        result = _ragmon(daemon.config, *shlex.split(command)[1:], cwd=daemon.tmp)
        out = result.stdout + result.stderr
        assert "in use" not in out and "DB::Exception" not in out and "Traceback" not in out, (command, out)
        assert result.returncode == 0, (command, out)
        ran.append(command)
    assert {"ragmon drift report", "ragmon store status", "ragmon review status", "ragmon drift check --all",
            "ragmon drift check --at 3h --all", "ragmon drift backtest --from 2d"} <= set(ran)
    assert (daemon.tmp / "drift.html").stat().st_size > 0
    assert daemon.proc.poll() is None


def test_a_missing_or_wrong_token_is_a_clear_error(daemon: Daemon) -> None:
    wrong = daemon.tmp / "wrong-token"
    wrong.write_text("not-the-daemons-token-at-all\n")
    env = {"RAGMON_READ_API__TOKEN_FILE": str(wrong)}
    result = _ragmon(daemon.config, "store", "status", env=env)
    assert result.returncode == 3
    assert "refused the read token" in result.stderr and "read_api.token_file" in result.stderr
    assert "DB::Exception" not in result.stderr + result.stdout and "Traceback" not in result.stderr
    result = _ragmon(daemon.config, "store", "status", env={"RAGMON_READ_API__TOKEN_FILE": str(daemon.tmp / "no")})
    assert result.returncode == 3 and "cannot read" in result.stderr and "in use by another process" in result.stderr
    result = _ragmon(daemon.config, "store", "status", env={"RAGMON_READ_API__URL": "http://127.0.0.1:9"})
    assert result.returncode == 3 and "did not answer" in result.stderr
    # a write is refused before it starts, naming what to do
    result = _ragmon(daemon.config, "review", "select", "--week", "2026-W01")
    assert result.returncode == 3 and "in use by another process" in result.stderr


def test_hostile_requests_are_refused_and_write_nothing(daemon: Daemon) -> None:
    announced = json.loads((daemon.data / ANNOUNCE).read_text())
    url, auth = f"{announced['url']}/api/v1/store/read", {"Authorization": f"Bearer {announced['token']}"}

    def post(body: object, headers: dict[str, str] | None = None, raw: bytes | None = None) -> httpx.Response:
        return httpx.post(url, content=raw if raw is not None else json.dumps(body), headers=auth if headers is None else headers,
                          timeout=30)

    count = {"op": "query", "sql": "SELECT count() AS n FROM ragmon_demo.traces FINAL"}
    before = post(count).json()["rows"]
    assert post(count, headers={}).status_code == 401
    assert post(count, headers={"Authorization": "Bearer " + announced["token"][:-1]}).status_code == 401
    for sql in ("INSERT INTO ragmon_demo.drift_checks (check_id) VALUES ('x')", "DROP TABLE ragmon_demo.traces",
                "TRUNCATE TABLE ragmon_demo.traces", "SELECT * FROM file('/etc/passwd', 'LineAsString')",
                "SELECT * FROM url('http://127.0.0.1:9/', 'LineAsString')", "SELECT 1 SETTINGS readonly = 0",
                "SYSTEM SHUTDOWN"):
        answer = post({"op": "query", "sql": sql})
        assert answer.status_code == 403, (sql, answer.text)
        assert "read-only" in answer.json()["error"]
    bad = post({"op": "query", "sql": "SELEC nonsense"})
    assert bad.status_code == 400 and "\n" not in bad.json()["error"]
    for body in ({"op": "drop", "sql": "SELECT 1"}, {"op": "query", "sql": ""}, [1, 2],
                 {"op": "query", "sql": "SELECT {x:String}", "parameters": {"x": {"$evil": 1}}},
                 {"op": "query", "sql": "SELECT {x:String}", "parameters": {"x": {"$m": [[[1], 2]]}}}):
        assert post(body).status_code == 400, body
    assert post(None, raw=b"\xff{not json").status_code == 400
    assert post(None, raw=b"[" * 100_000).status_code == 400
    assert post(None, raw=b" " * (2 << 20)).status_code == 413
    quoted = post({"op": "query", "sql": "SELECT {x:String} AS x", "parameters": {"x": "'); DROP TABLE t; --"}})
    assert quoted.json()["rows"] == [["'); DROP TABLE t; --"]]
    assert post(count).json()["rows"] == before
    assert daemon.proc.poll() is None


def test_read_commands_print_what_they_print_locally(daemon: Daemon) -> None:
    commands = read_commands(daemon.tmp)
    remote = [_ragmon(daemon.config, *c) for c in commands]
    daemon.proc.send_signal(signal.SIGTERM)
    daemon.proc.communicate(timeout=60)
    assert daemon.proc.returncode == 0
    assert not (daemon.data / ANNOUNCE).exists()  # withdrawn when it stops
    local = [_ragmon(daemon.config, *c) for c in commands]
    for command, there, here in zip(commands, remote, local, strict=True):
        assert there.returncode == here.returncode, (command, there.stderr, here.stderr)
        assert _same(there.stdout) == _same(here.stdout), command
        assert there.stdout.strip(), command
    assert json.loads(remote[1].stdout)  # --format json is JSON
