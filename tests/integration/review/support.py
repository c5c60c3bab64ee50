"""Helpers for the review tests: store traces and judge scores in chDB, build the review app, sign in."""

from __future__ import annotations

import json
import random
import re
from datetime import UTC, datetime, timedelta
from typing import Any

from fastapi import FastAPI
from fastapi.testclient import TestClient
from pydantic import SecretStr

from ragmon.config import ReviewSettings, ReviewUser
from ragmon.contracts.decode import DecodedTrace, decode_trace
from ragmon.review.auth import hash_password, token_digest
from ragmon.review.queries import ReviewStore
from ragmon.review.role import ReviewRole
from ragmon.review.selection import parse_week, previous_week
from ragmon.server import Health, create_app
from ragmon.store import ClickHouseStore, TraceColumns
from ragmon.telemetry import Telemetry
from tests.conftest import make_trace

PASSWORDS = {"alice": "correct horse battery", "bob": "tr0ub4dor&3"}
TOKENS = {"alice": "alice-api-token-0123456789", "bob": "bob-api-token-0123456789"}
_HASHES = {name: hash_password(pw) for name, pw in PASSWORDS.items()}
SESSION_SECRET = "s" * 40


def week_and_times(n: int, seed: int = 0) -> tuple[str, list[datetime]]:
    """The last complete ISO week and ``n`` random timestamps inside it (recent enough for the TTL)."""
    week = previous_week(datetime.now(UTC))
    start, end = parse_week(week)
    rnd = random.Random(seed)
    span = (end - start).total_seconds()
    return week, [start + timedelta(seconds=rnd.uniform(0, span - 1)) for _ in range(n)]


def insert_traces(store: ClickHouseStore, traces: list[dict[str, Any]]) -> None:
    batch = TraceColumns()
    for t in traces:
        decoded = decode_trace(json.dumps(t).encode())
        assert isinstance(decoded, DecodedTrace), decoded
        batch.add(decoded.trace)
    store.insert_columns("traces", batch.columns)


def week_traces(n: int, categories: list[str], seed: int = 0, **overrides: Any) -> tuple[str, list[dict[str, Any]]]:
    week, times = week_and_times(n, seed)
    rnd = random.Random(seed + 1)
    return week, [make_trace(trace_id=f"t-{seed}-{i:05d}", timestamp=ts.isoformat(), category=rnd.choice(categories),
                             **overrides) for i, ts in enumerate(times)]


def insert_score(store: ClickHouseStore, trace: dict[str, Any], metric: str, value: float, status: str = "ok",
                 fingerprint: str = "fp-heuristic-1") -> None:
    ts = datetime.fromisoformat(trace["timestamp"])
    store.insert_rows(
        "scores",
        [[trace["trace_id"], trace["query_id"], ts, datetime.now(UTC), "hybrid", "v1", "production",
          trace.get("category", ""), metric, value, status, "", "heuristic", fingerprint, json.dumps({"why": "test"})]],
        ["trace_id", "query_id", "ts", "scored_at", "retriever_name", "retriever_version", "variant", "category",
         "metric", "value", "status", "error", "judge_name", "judge_fingerprint", "details"],
    )


def review_settings(**overrides: Any) -> ReviewSettings:
    users = [ReviewUser(username=n, password_hash=SecretStr(_HASHES[n]),
                        token_sha256=SecretStr(token_digest(TOKENS[n])))
             for n in PASSWORDS]
    # served over plain HTTP (TestClient, 127.0.0.1): a Secure cookie would never come back
    values: dict[str, Any] = {"users": users, "session_secret": SecretStr(SESSION_SECRET), "cookie_secure": False}
    values.update(overrides)
    return ReviewSettings(**values)


class Clock:
    """A settable Unix clock."""

    def __init__(self, now: float | None = None):
        self.now = now if now is not None else datetime.now(UTC).timestamp()

    def __call__(self) -> float:
        return self.now


def review_app(store: ClickHouseStore | ReviewStore, clock: Clock | None = None,
               **overrides: Any) -> tuple[FastAPI, Telemetry]:
    telemetry = Telemetry()
    role = ReviewRole(review_settings(**overrides), store, telemetry, clock=clock or Clock())
    return create_app(telemetry, Health(), routers=[role.router]), telemetry


def signed_in(app: FastAPI, user: str = "alice") -> TestClient:
    client = TestClient(app, follow_redirects=False)
    page = client.get("/review/login")
    token = csrf_of(page.text)
    r = client.post("/review/login", data={"username": user, "password": PASSWORDS[user], "csrf_token": token,
                                           "next": "/review/"})
    assert r.status_code == 303, r.text
    return client


def csrf_of(html: str) -> str:
    return re.search(r'name="csrf_token" value="([^"]+)"', html).group(1)  # type: ignore[union-attr]
