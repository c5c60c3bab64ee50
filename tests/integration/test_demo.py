"""`ragmon demo` end to end in a subprocess (its own chDB directory): the injected incident is found, the
shadow verdicts name the winning and losing strata, the thumbs-down burst leads the triage queue, the judge
agreement job reports the week the simulated reviewers drifted in, and --keep-serving serves the review UI and
/metrics."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]


def _demo(tmp_path: Path, *args: str, **popen: object) -> subprocess.Popen[str]:
    env = dict(os.environ, COLUMNS="200")
    return subprocess.Popen([sys.executable, "-m", "ragmon", "demo", "--dir", str(tmp_path / "demo"), *args],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, **popen)


def test_demo_finds_the_injected_incident_and_the_shadow_verdicts(tmp_path: Path) -> None:
    proc = _demo(tmp_path)
    out, _ = proc.communicate(timeout=600)
    assert proc.returncode == 0, out
    drift_rows = [line for line in out.splitlines() if "│ hybrid@v1" in line and "production" in line]
    drifted = {(row.split("│")[3].strip(), row.split("│")[4].strip()) for row in drift_rows}
    # the incident: billing only, retrieval scores and faithfulness
    assert ("billing", "top1_score") in drifted
    assert ("billing", "faithfulness") in drifted
    assert {stratum for stratum, _ in drifted} == {"billing"}, drift_rows
    # three malformed messages dead-lettered with their reasons, every valid trace stored once
    # (the two days' 18,002 traces and six history weeks of 480)
    assert re.search(r"20,885 │\s+20,882 │ invalid_json: 1, non_finite_score: 1, schema: 1", out), out
    verdicts = {m["stratum"]: m["verdict"] for m in re.finditer(
        r"│ (?P<stratum>billing|consent|returns|shipping)\s+│[^│]+│[^│]+│ (?P<verdict>promote|hold|reject)", out)}
    assert verdicts["shipping"] == "promote"
    assert verdicts["returns"] == "reject"
    assert "overall verdict: REJECT" in out
    assert "/review/" in out and "/metrics" in out
    # the injected permission leaks: two consent traces, each naming the globex chunk (never its text)
    assert "Permission leaks (counted on all 20,882 traces" in out and "2 trace(s), 2 chunk(s)" in out, out
    leak_rows = [line for line in out.splitlines() if "(globex)" in line]
    assert len(leak_rows) == 2 and all("│ consent" in row and "│ acme" in row for row in leak_rows), leak_rows
    _assert_triage_queue_led_by_the_burst(out)
    _assert_judge_agreement_drop(out)
    _assert_the_runbook_drift_commands_find_the_incident(tmp_path / "demo")
    _assert_the_readme_excerpt_says_what_the_demo_printed(out)


def _assert_the_readme_excerpt_says_what_the_demo_printed(out: str) -> None:
    """The README's excerpt is made by scripts/readme_demo.py from a run; what does not move with the hour the
    demo runs must match this run (which features page can: the incident's partial first hour moves with it)."""
    spec = importlib.util.spec_from_file_location("readme_demo", ROOT / "scripts" / "readme_demo.py")
    assert spec is not None and spec.loader is not None
    readme_demo = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(readme_demo)
    want, have = readme_demo.facts(out), readme_demo.facts(readme_demo.readme_excerpt())
    assert all(want.values()), f"the demo's output no longer parses: {want}"
    stale = {k: (have[k], want[k]) for k in want if k != "paging" and have[k] != want[k]}
    assert stale == {}, f"README's demo excerpt is stale (README, demo): {stale}; run python3 scripts/readme_demo.py"


def _assert_the_runbook_drift_commands_find_the_incident(data: Path) -> None:
    """The drift commands of the runbooks, run on the demo's data with no configuration, apply the windows the
    demo's check ran with (six hours against the day before) and find what it found (issue 31: they used their
    own default windows and answered '160 with too few samples' and '0 declared drift')."""
    env = dict(os.environ, RAGMON_STORE__DSN=f"chdb://{data}", RAGMON_STORE__DATABASE="ragmon_demo")

    def ragmon(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "ragmon", *args], capture_output=True, text=True, env=env,
                              timeout=300)

    check = ragmon("drift", "check", "--format", "json")
    assert check.returncode == 0, check.stderr
    assert ("billing", "faithfulness") in {(r["stratum"], r["feature"]) for r in json.loads(check.stdout)
                                           if r["persistent"]}, check.stdout
    assert "windows 6 h against the day before" in check.stderr
    replay = ragmon("drift", "backtest", "--from", "2d", "--format", "json")
    assert replay.returncode == 0, replay.stderr
    began = {(f["stratum"], f["feature"]) for f in json.loads(replay.stdout)["features"]
             if f["persistent_onsets"] or f["active_at_start"]}
    assert ("billing", "faithfulness") in began, replay.stdout


def _table(out: str, title: str) -> list[list[str]]:
    """The body rows of the table printed under ``title``, as stripped cells."""
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(title))
    rows = []
    for line in lines[start + 1:]:
        if line.startswith("└"):
            break
        if line.startswith("│"):
            rows.append([cell.strip() for cell in line.strip("│").split("│")])
    return rows


def _assert_triage_queue_led_by_the_burst(out: str) -> None:
    injected = re.search(r"Injected: (\d+) thumbs-down in stratum (\w+)", out)
    assert injected, out
    burst, stratum = int(injected[1]), injected[2]
    queued = {row[0]: (int(row[2]), int(row[3])) for row in _table(out, "Triage queue ")}
    assert stratum == "billing" and burst > 0
    # the real selection queued the burst: its stratum holds the most queued thumbs-down, and all of the burst
    assert max(queued, key=lambda s: queued[s][1]) == stratum, queued
    assert queued[stratum][0] == burst and queued[stratum][1] >= burst, queued
    assert all(queued[s][0] == 0 and queued[s][1] > 0 for s in queued if s != stratum), queued  # the background


def _assert_judge_agreement_drop(out: str) -> None:
    assert "SIMULATED reviewers" in out
    header = next(line for line in out.splitlines() if line.startswith("┃ label"))
    weeks = re.findall(r"\d{4}-W\d{2}", header)
    assert len(weeks) == 2, header  # six history weeks: four calibrate, two after
    rows = _table(out, "Judge agreement (SIMULATED reviewers)")
    for label in ("grounded", "citations_supported"):
        cells = {row[1]: row for row in rows if row[0] == label}
        assert set(cells) == {"billing", "consent", "returns", "shipping", "ALL"}, rows
        # the latest week (the last column before the verdict) dropped in returns, and only there so far
        latest = {s: float(c[-2].split()[0]) for s, c in cells.items() if s != "ALL"}
        assert cells["returns"][-1] == "LOW", cells["returns"]
        assert min(latest, key=latest.__getitem__) == "returns", latest
        assert float(cells["returns"][-3].split()[0]) > latest["returns"], cells["returns"]  # the week before


def _assert_the_console_shows_the_demo(out: str, password: str) -> None:
    """Issue 32: the console's address is printed; signed in as the demo user, its Dead letters page shows the
    three messages the demo dead-lettered (from the demo's file: no broker is waited for) and its Shadow page the
    demo's shadow pair, without typing it."""
    console = re.search(r"console\s+(http://127\.0\.0\.1:\d+)/review/console/\s+\(.*sign in", out)
    assert console, out
    from tests.integration.review.support import csrf_of

    with httpx.Client(base_url=console[1], timeout=60) as client:
        login = client.get("/review/login")
        signed = client.post("/review/login", data={"username": "demo", "password": password,
                                                    "csrf_token": csrf_of(login.text), "next": "/review/console/"})
        assert signed.status_code in (200, 303), signed.text
        letters = client.get("/review/console/dead-letters").text
        assert "3 letters read" in letters and "dead-letters.jsonl" in letters, letters
        assert all(f"<td>{r}</td>" in letters for r in ("invalid_json", "non_finite_score", "schema"))
        assert 'class="message problem"' not in letters
        shadow = client.get("/review/console/shadow").text
        assert "hybrid@v1 (production) vs hybrid@v2 (shadow)" in shadow and "verdict-" in shadow, shadow


def test_demo_keep_serving_serves_review_ui_and_metrics(tmp_path: Path) -> None:
    proc = _demo(tmp_path, "--queries", "1200", "--keep-serving", "--port", "0")
    lines: list[str] = []
    try:
        deadline = time.monotonic() + 300
        assert proc.stdout is not None
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            lines.append(line)
            if "serving until" in line:
                break
        out = "".join(lines)
        assert "serving until" in out, out
        metrics_url = re.findall(r"(http://127\.0\.0\.1:\d+)/metrics", out)[-1]
        password = re.search(r"user demo, password (\S+)\)", out)
        assert password, out
        metrics = httpx.get(f"{metrics_url}/metrics", timeout=10).text
        assert "ragmon_ingest_traces_stored_total" in metrics
        assert re.search(r'ragmon_review_items_due\{stratum="\w+"\} [1-9]', metrics), metrics
        page = httpx.get(f"{metrics_url}/review/", timeout=10, follow_redirects=False)
        assert page.status_code in (302, 303, 401), "the review UI must not be open without signing in"
        _assert_the_console_shows_the_demo(out, password[1])
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
