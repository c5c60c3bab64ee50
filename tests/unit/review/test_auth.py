"""Reviewer authentication: password hashes, API tokens, signed sessions with expiry, CSRF, sign-in throttle."""

from __future__ import annotations

import pytest
from pydantic import SecretStr

from ragmon.config import ReviewSettings, ReviewUser
from ragmon.errors import ConfigError
from ragmon.review.auth import (
    Authenticator,
    LoginThrottle,
    csrf_ok,
    hash_password,
    token_digest,
    verify_password,
)


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def settings(**kw) -> ReviewSettings:
    users = [ReviewUser(username="alice", password_hash=SecretStr(hash_password("pw-alice-123"))),
             ReviewUser(username="bot", token_sha256=SecretStr(token_digest("tok-123")))]
    return ReviewSettings(**{"users": users, "session_secret": SecretStr("k" * 32), **kw})


def test_password_hash_round_trip_and_salting():
    h = hash_password("secret password")
    assert h.startswith("scrypt$") and "secret" not in h
    assert verify_password("secret password", h)
    assert not verify_password("secret passworD", h)
    assert hash_password("secret password") != h  # salted
    for broken in ("", "scrypt$1$2", "md5$x$y$z$a$b", "scrypt$16384$8$1$!!$!!", h[:-4]):
        assert not verify_password("secret password", broken)


def test_users_are_required_and_checked():
    with pytest.raises(ConfigError, match="no reviewers configured"):
        Authenticator(ReviewSettings(), Clock())
    with pytest.raises(ConfigError, match="neither password_hash nor token_sha256"):
        Authenticator(ReviewSettings(users=[ReviewUser(username="x")]), Clock())
    with pytest.raises(ConfigError, match="at least 32 characters"):
        Authenticator(settings(session_secret=SecretStr("short")), Clock())


def test_users_file(tmp_path):
    f = tmp_path / "users.yaml"
    f.write_text(f"- username: carol\n  password_hash: '{hash_password('carol-pass')}'\n")
    auth = Authenticator(settings(users_file=f), Clock())
    assert auth.check_password("carol", "carol-pass") and not auth.check_password("carol", "x")
    f.write_text("- username: 'bad name!'\n")
    with pytest.raises(ConfigError, match="users_file"):
        Authenticator(settings(users_file=f), Clock())


def test_password_and_token_checks():
    auth = Authenticator(settings(), Clock())
    assert auth.check_password("alice", "pw-alice-123")
    assert not auth.check_password("alice", "wrong") and not auth.check_password("nobody", "pw-alice-123")
    assert not auth.check_password("bot", "")  # a token-only user cannot sign in with a password
    assert auth.check_token("tok-123") == "bot" and auth.check_token("tok-124") is None


def test_session_cookie_expires_and_cannot_be_forged():
    clock = Clock()
    auth = Authenticator(settings(session_max_age_seconds=60), clock)
    session, cookie = auth.new_session("alice")
    assert auth.read_session(cookie) == session
    clock.now += 59
    assert auth.read_session(cookie) is not None
    clock.now += 2
    assert auth.read_session(cookie) is None
    _, cookie = auth.new_session("alice")
    assert auth.read_session(cookie[:-2] + ("AA" if not cookie.endswith("AA") else "BB")) is None
    assert auth.read_session("") is None and auth.read_session("garbage") is None
    other = Authenticator(settings(session_secret=SecretStr("z" * 32)), clock)
    assert other.read_session(cookie) is None  # another key: not ours
    removed = Authenticator(settings(users=[ReviewUser(username="bot", token_sha256=SecretStr("00"))]), clock)
    assert removed.read_session(cookie) is None  # user no longer configured


def test_csrf_compare():
    assert csrf_ok("abc", "abc")
    assert not csrf_ok("abc", "abd") and not csrf_ok("abc", "") and not csrf_ok("abc", None)
    assert not csrf_ok("", "") and not csrf_ok("abc", "ä")


def test_login_token_double_submit():
    clock = Clock()
    auth = Authenticator(settings(), clock)
    token, cookie = auth.new_login_token()
    assert auth.check_login_token(token, cookie)
    assert not auth.check_login_token(token + "x", cookie) and not auth.check_login_token(token, None)
    clock.now += 3601
    assert not auth.check_login_token(token, cookie)


def test_throttle_window_and_bound():
    clock = Clock()
    t = LoginThrottle(3, 60, clock, max_keys=20)
    for _ in range(3):
        assert not t.blocked("alice", "1.2.3.4")
        t.failed("alice", "1.2.3.4")
    assert t.blocked("alice", "1.2.3.4") and not t.blocked("alice", "5.6.7.8")
    clock.now += 61
    assert not t.blocked("alice", "1.2.3.4")
    t.failed("bob", "x")
    t.succeeded("bob", "x")
    assert not t.blocked("bob", "x")
    for i in range(100):
        t.failed(f"u{i}", "x")
    assert len(t) <= 20


def test_throttle_blocks_one_client_trying_many_names_and_many_clients_trying_one_name():
    clock = Clock()
    t = LoginThrottle(2, 60, clock)
    for i in range(LoginThrottle.AddressFactor * 2):
        assert not t.blocked(f"user{i}", "10.0.0.1")
        t.failed(f"user{i}", "10.0.0.1")
    assert t.blocked("someone-new", "10.0.0.1") and not t.blocked("someone-new", "10.0.0.2")
    for i in range(LoginThrottle.UserFactor * 2):
        assert not t.blocked("alice", f"2001:db8::{i}")
        t.failed("alice", f"2001:db8::{i}")
    assert t.blocked("alice", "192.0.2.7")
    clock.now += 61
    assert not t.blocked("alice", "192.0.2.7") and not t.blocked("someone-new", "10.0.0.1")


def test_one_client_cannot_lock_a_reviewer_out_from_another_address():
    t = LoginThrottle(5, 300, Clock())
    for _ in range(50):  # blocked requests are not counted: the web handler stops before checking them
        if not t.blocked("alice", "203.0.113.9"):
            t.failed("alice", "203.0.113.9")
    assert t.blocked("alice", "203.0.113.9") and not t.blocked("alice", "198.51.100.1")


def test_throttle_memory_does_not_grow_with_the_length_of_user_names():
    import tracemalloc

    t = LoginThrottle(5, 300, Clock(), max_keys=1_000)
    names = [f"{i:06d}" + "A" * 100_000 for i in range(200)]  # 20 MB of user names
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    for name in names:
        t.failed(name, "198.51.100.1")
    grown = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    assert grown < 1_000_000, grown  # digests, not the names: ~400 keys of 32 bytes plus their deques
    for i in range(2_000):
        t.failed(f"u{i}", f"a{i}")
    assert len(t) <= 1_000
