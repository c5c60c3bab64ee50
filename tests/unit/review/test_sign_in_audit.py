"""Failed sign-ins are logged and counted (issue 19, part 5): wrong passwords, refusals while locked out and
unknown API tokens each log the user name and address, never the password or token, and count in
``ragmon_review_signin_failures_total{reason}``. Also where the Secure cookie flag comes from."""

from __future__ import annotations

import logging

import pytest
from fastapi.testclient import TestClient

from ragmon.config import ReviewSettings, ServerSettings
from ragmon.config.review import cookie_secure, is_loopback
from ragmon.review.in_memory import InMemoryReviewStore
from tests.integration.review.support import PASSWORDS, csrf_of, review_app


def _failures(telemetry, reason: str) -> float:
    return telemetry.registry.get_sample_value("ragmon_review_signin_failures_total", {"reason": reason}) or 0.0


def _sign_in(client: TestClient, user: str, password: str, **headers: str):
    token = csrf_of(client.get("/review/login").text)
    return client.post("/review/login", data={"username": user, "password": password, "csrf_token": token},
                       headers=headers)


def test_failed_sign_ins_and_lock_outs_are_logged_and_counted(caplog: pytest.LogCaptureFixture) -> None:
    app, telemetry = review_app(InMemoryReviewStore(), login_max_failures=2)
    client = TestClient(app, follow_redirects=False)
    caplog.set_level(logging.WARNING, logger="ragmon.review.auth")
    assert _sign_in(client, "alice", "hunter2-not-it").status_code == 401
    assert _sign_in(client, "alice\nFAKE LOG LINE", "hunter2-not-it").status_code == 401
    assert _sign_in(client, "alice", "hunter2-not-it").status_code == 401
    assert _sign_in(client, "alice", PASSWORDS["alice"]).status_code == 429  # locked out, even with the password
    assert _failures(telemetry, "bad_credentials") == 3
    assert _failures(telemetry, "locked_out") == 1
    text = caplog.text
    assert "hunter2" not in text and PASSWORDS["alice"] not in text
    assert "wrong user name or password; user 'alice', address testclient" in text
    assert "locked out" in text
    assert "FAKE LOG LINE" not in text.replace("'alice\\nFAKE LOG LINE'", "")  # quoted: no forged log line
    assert _sign_in(client, "bob", PASSWORDS["bob"]).status_code == 303
    assert _failures(telemetry, "bad_credentials") == 3


def test_unknown_api_tokens_are_counted_without_the_token(caplog: pytest.LogCaptureFixture) -> None:
    app, telemetry = review_app(InMemoryReviewStore())
    caplog.set_level(logging.WARNING, logger="ragmon.review.auth")
    answer = TestClient(app).get("/review/api/v1/weeks", headers={"Authorization": "Bearer secret-guess-123"})
    assert answer.status_code == 401
    assert _failures(telemetry, "bad_token") == 1
    assert "unknown API token" in caplog.text and "secret-guess-123" not in caplog.text


@pytest.mark.parametrize(("host", "loopback"), [("127.0.0.1", True), ("127.1.2.3", True), ("::1", True),
                                                ("localhost", True), ("0.0.0.0", False), ("10.0.0.5", False),
                                                ("::", False), ("review.example.com", False)])
def test_cookies_are_secure_unless_the_server_binds_loopback(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback
    server = ServerSettings(host=host)
    assert cookie_secure(ReviewSettings(), server) is (not loopback)
    assert cookie_secure(ReviewSettings(cookie_secure=True), server) is True
    assert cookie_secure(ReviewSettings(cookie_secure=False), server) is False


@pytest.mark.parametrize(("host", "secure", "warned"), [("127.0.0.1", False, False), ("0.0.0.0", True, True)])
def test_the_review_role_resolves_the_cookie_flag_and_warns_about_plain_http(
        host: str, secure: bool, warned: bool, caplog: pytest.LogCaptureFixture) -> None:
    from ragmon.config import Settings
    from ragmon.review.role import build
    from ragmon.telemetry import Telemetry
    from tests.integration.review.support import review_settings

    settings = Settings(server=ServerSettings(host=host),
                        review=review_settings().model_copy(update={"cookie_secure": None}))
    caplog.set_level(logging.WARNING, logger="ragmon.review")
    role = build(settings, InMemoryReviewStore(), Telemetry(), select=False).service
    assert role.context.auth.cookie_secure is secure
    assert ("over plain HTTP" in caplog.text) is warned
