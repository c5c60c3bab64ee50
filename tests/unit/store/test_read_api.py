"""The daemon's side of the read API without a daemon: who gets a read API, where its token and address are
written (owner-only, removed again), and that every query it runs goes to the store's read-only connection, never
to the store itself (tests/integration/test_store_chdb.py checks the real connection)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from ragmon.config import Settings
from ragmon.errors import ConfigError, PermanentStoreError
from ragmon.store.read_api import read_access


class FakeReader:
    """Records what the API asks; refuses like ClickHouse does in readonly mode when asked to write."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any, Any]] = []

    def query(self, sql: str, parameters: Any = None, settings: Any = None) -> Any:
        self.calls.append((sql, parameters, settings))
        if sql.startswith("INSERT"):
            raise PermanentStoreError("ClickHouse query failed: Code: 164. DB::Exception: ... (READONLY)")
        return type("R", (), {"column_names": ("x",), "result_rows": [(1,)]})()

    def command(self, sql: str, parameters: Any = None, settings: Any = None) -> Any:
        self.calls.append((sql, parameters, settings))
        return 7


class FakeStore(FakeReader):
    """The daemon's store: whatever the read API runs must go to ``reader()``'s connection instead."""

    def __init__(self) -> None:
        super().__init__()
        self.readers: list[FakeReader] = []

    def reader(self) -> FakeReader:
        self.readers.append(FakeReader())
        return self.readers[-1]


def _settings(tmp_path: Path, **read_api: Any) -> Settings:
    return Settings.model_validate({"store": {"dsn": f"chdb://{tmp_path / 'data'}"}, "read_api": read_api})


def test_only_an_embedded_store_with_the_api_on_gets_one(tmp_path: Path) -> None:
    assert read_access(Settings.model_validate({"store": {"dsn": "http://h:8123/db"}}), FakeStore()) is None
    assert read_access(_settings(tmp_path, enabled=False), FakeStore()) is None
    assert read_access(_settings(tmp_path), object()) is None  # a test double with no queries


def test_the_token_file_is_created_owner_only_and_the_announcement_withdrawn(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    token_file = tmp_path / "token"
    access = read_access(_settings(tmp_path, token_file=str(token_file)), FakeStore())
    assert token_file.read_text().strip() == access.token and token_file.stat().st_mode & 0o077 == 0
    assert read_access(_settings(tmp_path, token_file=str(token_file)), FakeStore()).token == access.token
    access.publish("0.0.0.0", 9108)
    announced = json.loads(access.announce_path.read_text())
    assert announced == {"url": "http://127.0.0.1:9108", "token": access.token}
    assert access.announce_path.stat().st_mode & 0o077 == 0
    access.withdraw()
    assert not access.announce_path.exists()
    with pytest.raises(ConfigError, match="cannot be created"):
        read_access(_settings(tmp_path, token_file=str(tmp_path / "missing" / "token")), FakeStore())


def test_every_query_runs_on_the_read_only_connection_and_a_write_is_403(tmp_path: Path) -> None:
    store = FakeStore()
    access = read_access(_settings(tmp_path, token="r" * 32), store)
    app = FastAPI()
    app.include_router(access.router)
    client = TestClient(app)
    auth = {"Authorization": "Bearer " + "r" * 32}
    ok = client.post("/api/v1/store/read", json={"op": "query", "sql": "SELECT 1"}, headers=auth)
    assert ok.json() == {"columns": ["x"], "rows": [[1]]}
    assert client.post("/api/v1/store/read", json={"op": "command", "sql": "SELECT 7"}, headers=auth).json() == {
        "value": 7}
    write = client.post("/api/v1/store/read", json={"op": "query", "sql": "INSERT INTO t VALUES (1)"}, headers=auth)
    assert write.status_code == 403 and "DB::Exception" not in write.text
    [reader] = store.readers
    assert store.calls == [] and len(reader.calls) == 3
    assert all(settings is None for _, _, settings in reader.calls)  # no per-query settings to leak anywhere
    assert client.post("/api/v1/store/read", json={"op": "query", "sql": "SELECT 1"}).status_code == 401
    assert len(reader.calls) == 3
