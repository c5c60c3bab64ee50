"""The console as a process serves it: ``build_process`` mounts it wherever the review UI is (same port, same
sign-in) and never without it, and every process exports where the alert rules' links point (without credentials)."""

from __future__ import annotations

import httpx
from prometheus_client import generate_latest

from ragmon.config import Settings
from ragmon.process import build_process
from tests.integration.review.support import PASSWORDS, csrf_of, review_settings

ONLY = {"ingest": False, "otlp": False, "score": False, "drift": True, "shadow": False}


def test_the_console_is_served_with_the_review_ui_and_links_are_exported(store):
    settings = Settings(roles={**ONLY, "review": True}, review=review_settings(),
                        console={"public_url": "https://oncall:Call-pw@ragmon.example.com/",
                                 "runbook_base_url": "https://wiki/rb?token=Wiki-tok"},
                        server={"port": 0})
    process = build_process(settings, store=store)
    port = process.serve()
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", follow_redirects=False) as client:
            assert client.get("/console").headers["location"] == "/review/console/"
            assert client.get("/review/console/traces").headers["location"].startswith("/review/login?next=")
            login = client.get("/review/login")
            r = client.post("/review/login", data={"username": "alice", "password": PASSWORDS["alice"],
                                                   "csrf_token": csrf_of(login.text), "next": "/review/console/"})
            assert r.status_code == 303
            assert client.get("/review/console/traces").status_code == 200
    finally:
        process.stop_server()
    metrics = generate_latest(process.telemetry.registry).decode()
    # anyone who can scrape /metrics reads these, and the alerts carry them into notifications: no credentials
    assert 'ragmon_links_info{console_url="https://ragmon.example.com",runbook_base_url="https://wiki/rb"} 1.0' \
        in metrics
    assert "Call-pw" not in metrics and "Wiki-tok" not in metrics


def test_no_console_without_the_review_ui_but_links_default_to_the_server_address(store):
    # the runbooks default to the copy the daemon serves under the console's address, not a placeholder address
    process = build_process(Settings(roles={**ONLY, "review": False}, server={"host": "127.0.0.1", "port": 9200}),
                            store=store)
    assert process.routers == []
    metrics = generate_latest(process.telemetry.registry).decode()
    assert ('ragmon_links_info{console_url="http://127.0.0.1:9200",'
            'runbook_base_url="http://127.0.0.1:9200/review/console/runbooks"} 1.0') in metrics
