"""What the process's one HTTP port tells a caller who has not signed in: ``/readyz`` gives each failing check's
reason, never the engine's error text (that is logged, once per change), and the API's schema is not served."""

from __future__ import annotations

import logging

import pytest
from fastapi.testclient import TestClient

from ragmon.server import Health, create_app, reason_of
from ragmon.telemetry import Telemetry

ENGINE_TEXT = ("Code: 516. DB::Exception: default: Authentication failed: password is incorrect, or there is no "
               "user with such name. (AUTHENTICATION_FAILED) (for url http://ch-prod-3.internal:8123)")


def test_readyz_answers_the_reason_and_logs_the_cause_once_per_change(caplog: pytest.LogCaptureFixture):
    answer = {"store": (False, f"store unreachable: {ENGINE_TEXT}")}
    health = Health()
    health.add_readiness("store", lambda: answer["store"])
    health.add_readiness("ingest", lambda: (True, "writes succeed"))
    client = TestClient(create_app(Telemetry(), health))
    with caplog.at_level(logging.INFO, logger="ragmon.server"):
        for _ in range(3):
            down = client.get("/readyz")
            assert down.status_code == 503
            assert down.json() == {"ok": False, "checks": {"store": {"ok": False, "detail": "store unreachable"},
                                                           "ingest": {"ok": True, "detail": "writes succeed"}}}
            assert "Authentication" not in down.text and "ch-prod-3" not in down.text
        answer["store"] = (True, "store answers")
        assert client.get("/readyz").status_code == 200
        client.get("/readyz")
    logged = [r.getMessage() for r in caplog.records if r.name == "ragmon.server"]
    assert logged == [f"readiness check store failing: store unreachable: {ENGINE_TEXT}",
                      "readiness check store passes again: store answers"]


def test_a_check_that_raises_is_answered_by_its_exception_type_only():
    def broken() -> tuple[bool, str]:
        raise RuntimeError(f"secret detail {ENGINE_TEXT}")

    health = Health()
    health.add_readiness("alpha", broken)
    answer = TestClient(create_app(Telemetry(), health)).get("/readyz")
    assert answer.status_code == 503
    assert answer.json()["checks"] == {"alpha": {"ok": False, "detail": "check raised RuntimeError"}}


@pytest.mark.parametrize(("detail", "reason"), [
    ("writes failing, consumption paused: DB::Exception: Table is in readonly mode",
     "writes failing, consumption paused"),
    ("store answers", "store answers"),
    ("last poll 3.2s ago (limit 60s)", "last poll 3.2s ago (limit 60s)"),
])
def test_reason_of(detail: str, reason: str):
    assert reason_of(detail) == reason


@pytest.mark.parametrize("path", ["/openapi.json", "/docs", "/redoc", "/docs/oauth2-redirect"])
def test_no_schema_or_api_docs_without_sign_in(path: str):
    client = TestClient(create_app(Telemetry(), Health()))
    assert client.get(path).status_code == 404
    assert client.get("/metrics").status_code == 200  # the app answers; only these are not served
