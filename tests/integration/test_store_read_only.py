"""Reads that must not write cannot change the writer's connection (issue 30, defect 1).

chDB keeps settings on the connection: a ``readonly = 1`` passed per call on the daemon's own connection stayed in
force, and every later write of the daemon failed with READONLY (review labels, sign-out, OTLP traces) until a
restart. The read API now runs on ``ClickHouseStore.reader()``, a connection of its own. Against the real
engine: every kind of request the read API can get, hostile ones included, is answered, and afterwards the
daemon's store still inserts, runs DDL and takes settings per call.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from ragmon.config import Settings
from ragmon.contracts import decode_trace
from ragmon.errors import PermanentStoreError
from ragmon.store import ClickHouseStore, SourcePosition
from ragmon.store.read_api import PATH, read_access
from ragmon.store.trace_json import TraceRows
from tests.conftest import make_trace

TOKEN = "t" * 32
#: what read commands send, and what a hostile holder of the token might: each either answers or is refused
REQUESTS = [
    ("query", "SELECT count() FROM {db}.traces FINAL", 200),
    ("command", "SELECT count() FROM {db}.traces", 200),
    ("query", "SELECT name, value FROM system.settings WHERE name = 'readonly'", 200),
    ("command", "SET readonly = 0", 403),
    ("query", "SELECT 1 SETTINGS readonly = 0", 403),
    ("command", "SET max_threads = 1", 403),
    ("command", "INSERT INTO {db}.traces (trace_id) VALUES ('x')", 403),
    ("command", "CREATE TABLE {db}.evil (x UInt8) ENGINE = Memory", 403),
    ("command", "TRUNCATE TABLE {db}.review_labels", 403),
    ("command", "DROP TABLE {db}.review_labels", 403),
    ("query", "SELECT * FROM file('/etc/passwd', 'LineAsString')", 403),
    ("query", "SELECT * FROM url('http://127.0.0.1:9/', 'LineAsString')", 403),
]


@pytest.fixture
def api(store: ClickHouseStore) -> Iterator[TestClient]:
    settings = Settings.model_validate({"store": {"dsn": store.settings.dsn.get_secret_value(),
                                                  "database": store.database},
                                        "read_api": {"token": TOKEN}})
    access = read_access(settings, store)
    assert access is not None
    app = FastAPI()
    app.include_router(access.router)
    with TestClient(app) as client:
        yield client


def _insert_trace(store: ClickHouseStore, trace_id: str) -> None:
    rows = TraceRows()
    rows.add(decode_trace(json.dumps(make_trace(trace_id=trace_id)).encode()).trace, SourcePosition("t", 0, 0))
    store.insert_trace_rows(rows, dedup_token=f"read-only-{trace_id}")


def _writes_still_work(store: ClickHouseStore, n: int) -> None:
    """Every kind of write the daemon makes: a trace batch (file() insert), a columnar insert with a dedup token
    (settings per call), DDL, and a read with FINAL."""
    _insert_trace(store, f"after-{n}")
    store.insert_rows("review_labels", [["2026-W49", f"after-{n}", "alice", 1]],
                      ["week", "trace_id", "reviewer", "answer_correct"], dedup_token=f"labels-{n}")
    store.command(f"CREATE TABLE IF NOT EXISTS {store.database}.probe_{n} (x UInt8) ENGINE = Memory")
    store.command(f"DROP TABLE {store.database}.probe_{n}")
    assert store.command("SELECT getSetting('readonly')") == 0
    assert store.command(f"SELECT count() FROM {store.table('traces')} FINAL WHERE trace_id = {{t:String}}",
                         {"t": f"after-{n}"}) == 1


def test_the_read_api_answers_reads_refuses_the_rest_and_the_daemon_still_writes(
        store: ClickHouseStore, api: TestClient) -> None:
    _writes_still_work(store, 0)
    for i, (op, sql, status) in enumerate(REQUESTS, start=1):
        answer = api.post(PATH, json={"op": op, "sql": sql.format(db=store.database)},
                          headers={"Authorization": f"Bearer {TOKEN}"})
        assert answer.status_code == status, (sql, answer.text)
        _writes_still_work(store, i)  # after each request, not only at the end: one sticky request is enough
    readonly = api.post(PATH, json={"op": "query", "sql": "SELECT getSetting('readonly')"},
                        headers={"Authorization": f"Bearer {TOKEN}"})
    assert readonly.json()["rows"] == [[1]]  # the API's own connection stays read-only


def test_readonly_per_call_on_the_writers_connection_is_refused_before_it_can_stick(store: ClickHouseStore) -> None:
    with pytest.raises(PermanentStoreError, match="reader"):
        store.command("SELECT 1", settings={"readonly": 1})
    _writes_still_work(store, 99)


def test_a_read_only_store_refuses_writes_and_settings_on_its_own_connection(store: ClickHouseStore) -> None:
    reader = store.reader()
    assert reader.read_only and reader.query("SELECT 1").result_rows == [(1,)]
    for statement in ("SET readonly = 0", f"INSERT INTO {store.table('review_labels')} (trace_id) VALUES ('x')"):
        with pytest.raises(PermanentStoreError, match="READONLY"):
            reader.command(statement)
    _writes_still_work(store, 7)


def test_a_read_only_connection_needs_the_engine_open_in_this_process(tmp_path: Path,
                                                                       store: ClickHouseStore) -> None:
    from ragmon.config import StoreSettings
    from ragmon.store.client import open_read_only_client

    with pytest.raises(PermanentStoreError, match="not open in this process"):
        open_read_only_client(StoreSettings(dsn=f"chdb://{tmp_path / 'elsewhere'}"))
    with pytest.raises(PermanentStoreError, match="embedded engine only"):
        open_read_only_client(StoreSettings(dsn="http://127.0.0.1:1/db"))
