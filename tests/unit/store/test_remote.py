"""The remote read store's side of the read API: what each answer of the daemon becomes. Every failure is a
``StoreError`` whose message says what to do; nothing of httpx reaches the caller; writes are refused."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import httpx
import pytest

from ragmon.config import Settings
from ragmon.errors import PermanentStoreError, RetryableStoreError
from ragmon.store import wire
from ragmon.store.remote import RemoteReadStore, connect_remote


def _store(handler) -> RemoteReadStore:
    return RemoteReadStore(Settings(), "http://daemon:9108", "t" * 32, transport=httpx.MockTransport(handler))


def test_rows_and_parameters_travel_exactly() -> None:
    seen = {}
    when = datetime(2026, 12, 1, 9, tzinfo=UTC)

    def answer(request: httpx.Request) -> httpx.Response:
        seen.update(json.loads(request.content), auth=request.headers["authorization"])
        return httpx.Response(200,
                              json={"columns": ["ts", "n"], "rows": [wire.encode([when, 3]), wire.encode([when, 4])]})

    store = _store(answer)
    rows = store.query_rows("SELECT ts, n FROM {t:Identifier} WHERE ts >= {s:DateTime64(3)}", {"s": when})
    assert rows == [{"ts": when, "n": 3}, {"ts": when, "n": 4}]
    assert wire.decode(seen["parameters"]["s"]) == when and seen["auth"] == "Bearer " + "t" * 32
    assert store.query_columns("SELECT 1")["n"] == (3, 4)


@pytest.mark.parametrize(("status", "body", "error", "says"), [
    (401, {"error": "x"}, PermanentStoreError, "refused the read token"),
    (404, {"detail": "Not Found"}, PermanentStoreError, "serves no read API"),
    (403, {"error": "refused: read-only"}, PermanentStoreError, "read-only"),
    (503, {"error": "store busy", "retryable": True}, RetryableStoreError, "store busy"),
    (200, ["not", "an", "object"], PermanentStoreError, "not a JSON object"),
    (200, {"columns": ["a"], "rows": [[{"$evil": 1}]]}, PermanentStoreError, "bad answer"),
])
def test_each_failure_says_what_to_do(status, body, error, says) -> None:
    store = _store(lambda request: httpx.Response(status, json=body))
    with pytest.raises(error, match=says):
        store.query_rows("SELECT 1")


def test_html_instead_of_json_and_an_unreachable_daemon() -> None:
    with pytest.raises(PermanentStoreError, match="not a read API answer"):
        _store(lambda request: httpx.Response(200, text="<html>a proxy page</html>")).command("SELECT 1")

    def down(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused")

    with pytest.raises(RetryableStoreError, match="did not answer.*read_api.url"):
        _store(down).ping()


def test_writes_and_settings_are_refused_without_asking() -> None:
    def never(request: httpx.Request) -> httpx.Response:
        raise AssertionError("no request for a write")

    store = _store(never)
    for write in (lambda: store.insert_rows("labels", [[1]], ["a"]), lambda: store.insert_columns("t", {"a": [1]}),
                  lambda: store.insert_trace_rows(object()), lambda: store.query("SELECT 1", settings={"x": 1})):
        with pytest.raises(PermanentStoreError, match="reads only"):
            write()
    assert store.migrate() == []


def test_without_an_announcement_or_settings_it_says_which_settings(tmp_path) -> None:
    settings = Settings.model_validate({"store": {"dsn": f"chdb://{tmp_path}"}})
    with pytest.raises(PermanentStoreError, match="read_api.url and read_api.token_file"):
        connect_remote(settings)
    (tmp_path / "ragmon-read-api.json").write_text("{broken")
    with pytest.raises(PermanentStoreError, match="cannot read"):
        connect_remote(settings)


def test_store_status_counts_rows_through_the_daemon() -> None:
    """``ragmon store status`` while the daemon holds the embedded store counts each table through the read API
    (the remote store had no ``row_count``: the runbook command failed with AttributeError while the daemon ran)."""
    seen = []

    def answer(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        seen.append((body["op"], body["sql"]))
        return httpx.Response(200, json={"value": wire.encode([7])[0]})

    store = _store(answer)
    assert store.row_count("traces") == 7 and store.row_count("drift_checks") == 7
    assert [sql for _, sql in seen] == [f"SELECT count() FROM {store.database}.traces FINAL",
                                        f"SELECT count() FROM {store.database}.drift_checks"]
    assert all(op == "command" for op, _ in seen), seen
