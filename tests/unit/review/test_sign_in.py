"""Signing in to the review pages, on the in-memory review store: passwords, CSRF, rate limits, redirects,
expiry and a changed password. None of it depends on what the store holds; signing out, which does, is tested
against chDB (``tests/integration/review/test_web.py``)."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from pydantic import SecretStr

from ragmon.config import ReviewUser
from ragmon.review.auth import hash_password
from ragmon.review.in_memory import InMemoryReviewStore
from tests.integration.review.support import PASSWORDS, Clock, csrf_of, review_app, review_settings, signed_in


@pytest.fixture
def store() -> InMemoryReviewStore:
    return InMemoryReviewStore()


def test_sign_in_checks_password_csrf_and_rate_limits(store):
    app, _ = review_app(store, login_max_failures=3)
    client = TestClient(app, follow_redirects=False)
    token = csrf_of(client.get("/review/login").text)
    no_csrf = client.post("/review/login", data={"username": "alice", "password": PASSWORDS["alice"]})
    assert no_csrf.status_code == 403
    token = csrf_of(client.get("/review/login").text)
    wrong = client.post("/review/login", data={"username": "alice", "password": "nope", "csrf_token": token})
    assert wrong.status_code == 401 and "Wrong user name or password" in wrong.text
    assert "ragmon_review_session" not in client.cookies
    for _ in range(3):
        token = csrf_of(client.get("/review/login").text)
        client.post("/review/login", data={"username": "alice", "password": "nope", "csrf_token": token})
    token = csrf_of(client.get("/review/login").text)
    locked = client.post("/review/login", data={"username": "alice", "password": PASSWORDS["alice"],
                                                "csrf_token": token})
    assert locked.status_code == 429
    # another user is not locked out
    bob = signed_in(app, "bob")
    assert bob.get("/review/").status_code == 200


def test_no_open_redirect_after_sign_in(store):
    app, _ = review_app(store)
    client = TestClient(app, follow_redirects=False)
    token = csrf_of(client.get("/review/login").text)
    r = client.post("/review/login", data={"username": "alice", "password": PASSWORDS["alice"], "csrf_token": token,
                                           "next": "//evil.example/x"})
    assert r.headers["location"] == "/review/"


def test_sessions_expire(store):
    clock = Clock()
    app, _ = review_app(store, clock=clock, session_max_age_seconds=600)
    client = signed_in(app)
    assert client.get("/review/").status_code == 200
    clock.now += 599
    assert client.get("/review/").status_code == 200
    clock.now += 2
    r = client.get("/review/")
    assert r.status_code == 303 and "/review/login" in r.headers["location"]


def test_a_changed_password_ends_the_sessions_begun_with_the_old_one(store):
    app, _ = review_app(store)
    cookie = signed_in(app).cookies["ragmon_review_session"]
    users = [u if u.username != "alice" else ReviewUser(username="alice", password_hash=SecretStr(hash_password("new")))
             for u in review_settings().users]
    restarted, _ = review_app(store, users=users)  # the config now holds alice's new hash
    r = TestClient(restarted, follow_redirects=False, cookies={"ragmon_review_session": cookie}).get("/review/")
    assert r.status_code == 303
