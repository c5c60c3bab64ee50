"""The daemon serves the runbooks itself (issue 32, item 1): with ``console.runbook_base_url`` unset, every alert's
``runbook_url`` points at ``<console>/review/console/runbooks/<AlertName>.md`` (exported in ``ragmon_links_info``)
and opens there behind the console's sign-in — for every rule in alerts/ragmon.rules.yaml, on a running daemon."""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import yaml
from prometheus_client import generate_latest

from ragmon.config import Settings
from ragmon.process import build_process
from tests.integration.review.support import PASSWORDS, csrf_of, review_settings

ROOT = Path(__file__).resolve().parents[3]
ONLY = {"ingest": False, "otlp": False, "score": False, "drift": False, "shadow": False, "review": True}
#: the rules append the runbook's file to the base the daemon exports
_TAIL = re.compile(r"\{\{ end \}\}/(Ragmon[A-Za-z0-9]+\.md)$")


def _rules() -> list[tuple[str, str]]:
    doc = yaml.safe_load((ROOT / "alerts" / "ragmon.rules.yaml").read_text())
    return [(rule["alert"], rule["annotations"]["runbook_url"]) for group in doc["groups"] for rule in group["rules"]]


def test_every_rules_runbook_url_opens_on_a_running_daemon(store) -> None:
    process = build_process(Settings(roles=ONLY, review=review_settings(), server={"host": "127.0.0.1", "port": 0}),
                            store=store)
    port = process.serve()
    try:
        metrics = generate_latest(process.telemetry.registry).decode()
        base = re.search(r'ragmon_links_info\{[^}]*runbook_base_url="([^"]+)"', metrics)
        assert base is not None
        # the address is the server's as configured (port 0 here); the path is where the daemon serves them
        assert base.group(1) == "http://127.0.0.1:0/review/console/runbooks"
        path = "/review/console/runbooks"
        rules = _rules()
        assert len(rules) >= 15
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", follow_redirects=False) as client:
            first = f"{path}/{rules[0][0]}.md"
            assert client.get(first).headers["location"] == f"/review/login?next={first.replace('/', '%2F')}"
            login = client.get("/review/login")
            client.post("/review/login", data={"username": "alice", "password": PASSWORDS["alice"],
                                               "csrf_token": csrf_of(login.text), "next": path})
            for alert, template in rules:
                tail = _TAIL.search(template)
                assert tail is not None and tail.group(1) == f"{alert}.md", template
                page = client.get(f"{path}/{tail.group(1)}")
                assert page.status_code == 200, alert
                source = (ROOT / "alerts" / "runbooks" / f"{alert}.md").read_text()
                heading = next(line for line in source.splitlines() if line.startswith("#"))
                assert heading.lstrip("# ").strip().replace("&", "&amp;") in page.text
            listing = client.get(path)
            assert all(f'href="{path}/{alert}.md"' in listing.text for alert, _ in rules)
            for bad in ("RagmonNoSuchAlert.md", "..%2F..%2Fpyproject.toml", "ragmon.rules.yaml"):
                assert client.get(f"{path}/{bad}").status_code == 404, bad
    finally:
        process.stop_server()
