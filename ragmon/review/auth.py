"""Reviewer sign-in: password and token checks, signed session cookies, CSRF tokens, sign-in rate limiting.

Owns who a request is. Users come from the ``review`` config section (and ``users_file``); passwords are
stored only as scrypt hashes and API tokens only as SHA-256 digests, compared in constant time. A session is a
cookie signed with HMAC (itsdangerous) holding the user name, an expiry, the session's CSRF token and a mark of
the user's password hash, so no session table is needed; every replica sharing ``session_secret`` accepts it.
Rotating the secret, changing the user's password hash, or removing the user from config ends every session of
theirs; signing out ends one (``sessions.py`` records it in the store). Failed sign-ins, refusals of a locked-out
user and address, and unknown API tokens are logged (user name and address, never the password or token) and
counted in ``ragmon_review_signin_failures_total{reason}``. Must not: render pages, touch the store, or log
secrets.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import logging
import secrets
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from itsdangerous import BadSignature, URLSafeSerializer
from pydantic import TypeAdapter, ValidationError

from ragmon.config import ReviewSettings, ReviewUser, secret_value
from ragmon.errors import ConfigError
from ragmon.review.metrics import ReviewMetrics
from ragmon.telemetry import Telemetry

log = logging.getLogger("ragmon.review.auth")
#: ``reason`` label values of ``ragmon_review_signin_failures_total``
SIGNIN_FAILURE_REASONS = ("bad_credentials", "locked_out", "bad_token")
SESSION_COOKIE = "ragmon_review_session"
LOGIN_COOKIE = "ragmon_review_login"
_SCRYPT = {"n": 2**14, "r": 8, "p": 1}
#: hashed when the user is unknown, so a wrong user name costs as much time as a wrong password
_DUMMY_HASH = "scrypt$16384$8$1$AAAAAAAAAAAAAAAAAAAAAA==$AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="


def hash_password(password: str, *, salt: bytes | None = None) -> str:
    """``scrypt$n$r$p$salt$hash`` (base64), the form ``review.users[].password_hash`` takes."""
    salt = salt or secrets.token_bytes(16)
    digest = hashlib.scrypt(password.encode(), salt=salt, maxmem=64 * 2**20, dklen=32, **_SCRYPT)
    b64 = base64.b64encode
    return f"scrypt${_SCRYPT['n']}${_SCRYPT['r']}${_SCRYPT['p']}${b64(salt).decode()}${b64(digest).decode()}"


def verify_password(password: str, encoded: str) -> bool:
    """Constant-time check of ``password`` against an encoded scrypt hash; False for a malformed hash."""
    try:
        scheme, n, r, p, salt_b64, hash_b64 = encoded.split("$")
        if scheme != "scrypt":
            return False
        salt, expected = base64.b64decode(salt_b64, validate=True), base64.b64decode(hash_b64, validate=True)
        if len(expected) != 32 or len(salt) < 8:
            return False
        digest = hashlib.scrypt(password.encode(), salt=salt, n=int(n), r=int(r), p=int(p), maxmem=64 * 2**20,
                                dklen=32)
    except (ValueError, TypeError, binascii.Error):  # UnicodeError (a lone surrogate) is a ValueError too
        return False
    return hmac.compare_digest(digest, expected)


def token_digest(token: str) -> str:
    """SHA-256 hex of an API token: what the config stores as ``token_sha256``."""
    return hashlib.sha256(token.encode()).hexdigest()


def load_users(settings: ReviewSettings) -> dict[str, ReviewUser]:
    """Users from the config and ``users_file``; raises ``ConfigError`` if none can sign in."""
    users = list(settings.users)
    if settings.users_file is not None:
        users += _read_users_file(settings.users_file)
    problems = []
    by_name: dict[str, ReviewUser] = {}
    for user in users:
        if user.username in by_name:
            problems.append(f"review.users: {user.username!r} is listed twice")
        if user.password_hash is None and user.token_sha256 is None:
            problems.append(f"review.users: {user.username!r} has neither password_hash nor token_sha256")
        by_name[user.username] = user
    if not by_name:
        problems.append("review.users: no reviewers configured, and the review UI allows no anonymous access; add "
                        "users with `ragmon review hash-password` (see docs/review.md)")
    if problems:
        raise ConfigError(problems)
    return by_name


def _read_users_file(path: Path) -> list[ReviewUser]:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or []
        return TypeAdapter(list[ReviewUser]).validate_python(data)
    except OSError as exc:
        raise ConfigError([f"review.users_file: cannot read {path} ({exc.strerror or exc})"]) from None
    except UnicodeDecodeError as exc:
        raise ConfigError([f"review.users_file: {path} is not UTF-8 text (byte {exc.start}); it holds a YAML list of "
                           "users"]) from None
    except yaml.YAMLError:
        raise ConfigError([f"review.users_file: {path} is not valid YAML"]) from None
    except ValidationError as exc:
        raise ConfigError([f"review.users_file: {path}: {e['loc']}: {e['msg']}" for e in exc.errors()]) from None


@dataclass(frozen=True, slots=True)
class Session:
    """A signed-in reviewer. ``csrf`` must accompany every state-changing request made with the cookie."""

    username: str
    csrf: str
    expires_at: float


class LoginThrottle:
    """Failed sign-ins in a sliding window; thread-safe, in memory, bounded.

    Three counts, each blocking once it reaches its limit within ``window_seconds``:

    - per (user, address), ``max_failures``: one client guessing one reviewer's password;
    - per address, ``AddressFactor`` × that: one client trying many user names (each costs an scrypt);
    - per user, ``UserFactor`` × that: many clients guessing one reviewer's password.

    A single client can therefore never lock a reviewer out (its own pair blocks first), and can make at most
    ``AddressFactor × max_failures`` password checks per window. Keys are SHA-256 digests, so a megabyte-long
    user name costs 32 bytes; keys with nothing left in the window are dropped, and at ``max_keys`` the oldest go.
    """

    AddressFactor = 10
    UserFactor = 10

    def __init__(self, max_failures: int, window_seconds: float, clock: Callable[[], float], max_keys: int = 10_000,
                 on_failure: Callable[[str, str, str], None] | None = None):
        self.max_failures, self.window, self._clock, self._max_keys = max_failures, window_seconds, clock, max_keys
        #: called with (reason, username, address) for each failed sign-in and each refusal while locked out
        self._on_failure = on_failure or (lambda reason, username, address: None)
        self._failures: dict[bytes, deque[float]] = {}
        self._lock = threading.Lock()

    @staticmethod
    def _keys(username: str, address: str) -> tuple[bytes, bytes, bytes]:
        def digest(kind: str, value: str) -> bytes:
            return hashlib.sha256(f"{kind}\0{value}".encode(errors="replace")).digest()

        return digest("pair", f"{username}\0{address}"), digest("address", address), digest("user", username)

    def _recent(self, key: bytes) -> int:
        q = self._failures.get(key)
        if q is None:
            return 0
        cutoff = self._clock() - self.window
        while q and q[0] <= cutoff:
            q.popleft()
        if not q:
            del self._failures[key]
        return len(q)

    def __len__(self) -> int:
        """How many keys are tracked (bounded by ``max_keys``)."""
        with self._lock:
            return len(self._failures)

    def blocked(self, username: str, address: str) -> bool:
        pair, addr, user = self._keys(username, address)
        with self._lock:
            locked = (self._recent(pair) >= self.max_failures
                      or self._recent(addr) >= self.AddressFactor * self.max_failures
                      or self._recent(user) >= self.UserFactor * self.max_failures)
        if locked:
            self._on_failure("locked_out", username, address)
        return locked

    def failed(self, username: str, address: str) -> None:
        now = self._clock()
        with self._lock:
            if len(self._failures) + 3 > self._max_keys:
                for key in list(self._failures):  # drop what has expired …
                    self._recent(key)
                if len(self._failures) + 3 > self._max_keys:  # … then the oldest keys (dicts keep insertion order)
                    for key in list(self._failures)[: max(3, self._max_keys // 10)]:
                        del self._failures[key]
            for key in self._keys(username, address):
                self._failures.setdefault(key, deque()).append(now)
        self._on_failure("bad_credentials", username, address)

    def succeeded(self, username: str, address: str) -> None:
        pair, _, _ = self._keys(username, address)
        with self._lock:
            self._failures.pop(pair, None)


class Authenticator:
    """Checks credentials and issues/reads session cookies. Thread-safe; ``clock`` is injected for tests."""

    def __init__(self, settings: ReviewSettings, clock: Callable[[], float], telemetry: Telemetry | None = None):
        self.users = load_users(settings)
        self.max_age = settings.session_max_age_seconds
        # unset: secure (the review role resolves it from server.host before it gets here)
        self.cookie_secure = settings.cookie_secure is not False
        self._failures = telemetry.use(ReviewMetrics).review_signin_failures if telemetry is not None else None
        self._clock = clock
        key = secret_value(settings.session_secret)
        if key is not None and len(key) < 32:
            raise ConfigError(["review.session_secret: must be at least 32 characters (e.g. `openssl rand -hex 32`)"])
        self.ephemeral_key = key is None
        key = key or secrets.token_hex(32)
        self._serializer = URLSafeSerializer(key, salt="ragmon-review-session")
        self._login_serializer = URLSafeSerializer(key, salt="ragmon-review-login")
        self._mark_key = hashlib.sha256(f"ragmon-review-credential\0{key}".encode()).digest()
        self.throttle = LoginThrottle(settings.login_max_failures, settings.login_lockout_seconds, clock,
                                      on_failure=self.record_failure)

    def record_failure(self, reason: str, username: str, address: str) -> None:
        """Log and count a failed sign-in (``reason`` one of ``SIGNIN_FAILURE_REASONS``). The user name is what the
        client typed (shown quoted and cut, so it cannot forge log lines); the password never reaches here."""
        what = {"bad_credentials": "wrong user name or password", "locked_out": "refused: too many failures (locked "
                "out)", "bad_token": "unknown API token"}[reason]
        log.warning("review sign-in failed: %s; user %r, address %s", what, username[:64], address[:64])
        if self._failures is not None:
            self._failures.labels(reason=reason).inc()

    # -- credentials ------------------------------------------------------------------------------------------

    def check_password(self, username: str, password: str) -> bool:
        user = self.users.get(username)
        encoded = secret_value(user.password_hash) if user else None
        ok = verify_password(password, encoded or _DUMMY_HASH)
        return ok and encoded is not None

    def check_token(self, token: str, address: str = "-") -> str | None:
        """The user whose API token this is, or None. Every user is compared, in constant time."""
        digest = token_digest(token)
        found = None
        for name, user in self.users.items():
            expected = secret_value(user.token_sha256)
            if expected is not None and hmac.compare_digest(digest, expected.strip().lower()):
                found = name
        if found is None:
            self.record_failure("bad_token", "", address)
        return found

    # -- sessions ---------------------------------------------------------------------------------------------

    def _credential_mark(self, username: str) -> str:
        """A keyed digest of the user's current password hash: a session signed before the hash changed fails."""
        user = self.users.get(username)
        encoded = (secret_value(user.password_hash) if user else None) or ""
        return hmac.new(self._mark_key, f"{username}\0{encoded}".encode(), hashlib.sha256).hexdigest()[:22]

    def new_session(self, username: str) -> tuple[Session, str]:
        """A fresh session for ``username`` and its signed cookie value."""
        session = Session(username, secrets.token_urlsafe(32), self._clock() + self.max_age)
        cookie = self._serializer.dumps({"u": session.username, "c": session.csrf, "e": session.expires_at,
                                         "k": self._credential_mark(username)})
        return session, cookie

    def read_session(self, cookie: str | None) -> Session | None:
        """The session in a cookie, or None when missing, forged, expired, the user was removed or their password
        changed. (Whether it was signed out is ``sessions.SignedOut``'s question.)"""
        if not cookie:
            return None
        try:
            data: Any = self._serializer.loads(cookie)
            session = Session(str(data["u"]), str(data["c"]), float(data["e"]))
            mark = str(data["k"])
        except (BadSignature, KeyError, TypeError, ValueError):
            return None
        if session.expires_at <= self._clock() or session.username not in self.users:
            return None
        if not hmac.compare_digest(mark.encode(), self._credential_mark(session.username).encode()):
            return None  # the password changed since this session began
        return session

    # -- CSRF for the sign-in form (before a session exists: a signed double-submit token) ------------------

    def new_login_token(self) -> tuple[str, str]:
        """(token for the form, signed cookie value)."""
        token = secrets.token_urlsafe(24)
        return token, self._login_serializer.dumps({"t": token, "e": self._clock() + 3600})

    def check_login_token(self, form_token: str, cookie: str | None) -> bool:
        try:
            data: Any = self._login_serializer.loads(cookie or "")
            token, expires = str(data["t"]), float(data["e"])
        except (BadSignature, KeyError, TypeError, ValueError):
            return False
        return expires > self._clock() and hmac.compare_digest(form_token.encode(), token.encode())


def csrf_ok(expected: str, presented: str | None) -> bool:
    """Constant-time check of a form field or X-CSRF-Token header against the session's CSRF token."""
    return bool(expected) and bool(presented) and hmac.compare_digest(str(presented).encode(), expected.encode())
