"""The ClickHouse store against the real engine (embedded chDB): migrations, idempotent inserts, parameterized
reads, the trace row layout, DSN checks, fail-fast on an unreachable server and chDB's one-process lock.

In-process tests use the ``store`` fixture (a fresh database in the session's one chDB directory); tests that
need a chDB directory of their own run ragmon in subprocesses.
"""

from __future__ import annotations

import itertools
import json
import os
import select
import subprocess
import sys
import uuid
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr

from ragmon.config import StoreSettings
from ragmon.contracts import DecodedTrace, Trace, decode_trace
from ragmon.errors import PermanentStoreError, RetryableStoreError, StoreError
from ragmon.store import (
    SELECT_TRACE_COLUMNS,
    TABLES,
    ClickHouseStore,
    SourcePosition,
    TraceColumns,
    row_to_trace,
)
from ragmon.store.client import parse_dsn
from ragmon.store.migrate import load_migrations, render, tracking_table_sql
from ragmon.store.trace_json import TraceRows
from tests.conftest import make_trace

ROOT = Path(__file__).resolve().parents[2]


def decoded(doc: dict[str, Any]) -> DecodedTrace:
    result = decode_trace(json.dumps(doc).encode())
    assert isinstance(result, DecodedTrace), result
    return result


def batch(docs: list[dict[str, Any]], topic: str = "rag.traces", partition: int = 0) -> TraceColumns:
    columns = TraceColumns()
    for offset, doc in enumerate(docs):
        d = decoded(doc)
        columns.add(d.trace, SourcePosition(topic, partition, offset), size_bytes=d.size_bytes)
    return columns


def count(store: ClickHouseStore, *, final: bool, where: str = "", parameters: dict | None = None) -> int:
    sql = f"SELECT count() FROM {store.table('traces')} {'FINAL' if final else ''} {where}"
    return int(store.query(sql, parameters).result_rows[0][0])


def recent(**overrides: Any) -> dict[str, Any]:
    """A trace with a millisecond timestamp (the column is DateTime64(3)) a few minutes old (inside the TTL)."""
    ts = (datetime.now(UTC) - timedelta(minutes=5)).replace(microsecond=123_000)
    return make_trace(timestamp=ts.isoformat(), **overrides)


def run_ragmon(*args: str, env: dict[str, str], timeout: float = 90) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if not k.upper().startswith("RAGMON_")}
    return subprocess.run([sys.executable, "-m", "ragmon", *args], capture_output=True, text=True, timeout=timeout,
                          env={**clean, "PYTHONPATH": str(ROOT), **env})


# -- migrations ------------------------------------------------------------------------------------------------


def test_migrations_twice_are_a_no_op(store: ClickHouseStore):
    before = store.applied_migrations()
    assert [v for v, _, _ in before] == [m.version for m in load_migrations()]
    assert store.migrate() == []
    assert store.migrate() == []
    assert store.applied_migrations() == before
    tables = {r[0] for r in store.query("SELECT name FROM system.tables WHERE database = {db:String}",
                                        {"db": store.database}).result_rows}
    assert set(TABLES) <= tables


def test_migrations_on_an_empty_database_apply_everything(store_settings: StoreSettings):
    fresh = StoreSettings(dsn=store_settings.dsn, database=store_settings.database + "_fresh")
    opened = ClickHouseStore.open(fresh, migrate=False)
    try:
        applied = opened.migrate()
        assert applied == [f"{m.version:04d}_{m.name}" for m in load_migrations()]
        assert opened.migrate() == []
    finally:
        opened.command(f"DROP DATABASE IF EXISTS {fresh.database}")


# -- idempotent inserts ------------------------------------------------------------------------------------------


def test_same_batch_twice_with_the_same_token_reads_back_once_without_final(store: ClickHouseStore):
    docs = [recent() for _ in range(25)]
    assert store.insert_columns("traces", batch(docs).columns, dedup_token="rag.traces/0/0-24") == 25
    assert store.insert_columns("traces", batch(docs).columns, dedup_token="rag.traces/0/0-24") == 25
    assert count(store, final=False) == 25
    assert count(store, final=True) == 25


def test_same_batch_twice_without_a_token_doubles_before_final(store: ClickHouseStore):
    """Negative control: the check above can fail. Without a token both inserts land; FINAL collapses them."""
    docs = [recent() for _ in range(10)]
    store.insert_columns("traces", batch(docs).columns)
    store.insert_columns("traces", batch(docs).columns)
    assert count(store, final=False) == 20
    assert count(store, final=True) == 10


def test_reinserting_a_trace_id_with_another_token_reads_back_once_with_final(store: ClickHouseStore):
    docs = [recent() for _ in range(5)]
    store.insert_columns("traces", batch(docs).columns, dedup_token="rag.traces/0/0-4")
    # redelivered after a rebalance: same traces, a different offset range, so a different token
    store.insert_columns("traces", batch(docs, partition=3).columns, dedup_token="rag.traces/3/100-104")
    assert count(store, final=False) == 10
    assert count(store, final=True) == 5
    # the latest delivery wins (ReplacingMergeTree version = ingested_at)
    rows = store.query_rows(f"SELECT DISTINCT source_partition FROM {store.table('traces')} FINAL")
    assert rows == [{"source_partition": 3}]


def test_row_count_reads_each_table_as_reads_see_it(store: ClickHouseStore):
    """``store status`` and the demo count through ``row_count``: a re-delivered trace counts once (FINAL); every
    table of ``TABLES`` can be counted."""
    docs = [recent() for _ in range(4)]
    store.insert_columns("traces", batch(docs).columns, dedup_token="rag.traces/0/0-3")
    store.insert_columns("traces", batch(docs, partition=2).columns, dedup_token="rag.traces/2/7-10")
    assert count(store, final=False) == 8
    assert store.row_count("traces") == 4
    assert {name: store.row_count(name) for name in TABLES} == {name: 4 if name == "traces" else 0 for name in TABLES}


def test_a_token_is_per_batch_not_per_table(store: ClickHouseStore):
    first, second = [recent() for _ in range(3)], [recent() for _ in range(3)]
    store.insert_columns("traces", batch(first).columns, dedup_token="p0/0-2")
    store.insert_columns("traces", batch(second).columns, dedup_token="p0/3-5")
    assert count(store, final=False) == 6


# -- parameterized reads ------------------------------------------------------------------------------------------


HOSTILE = [
    "it's",
    "'; DROP TABLE traces; --",
    "\\'; DROP DATABASE default; --",
    "{id:String}",
    "\" OR 1=1 --",
    "line\nbreak\ttab\x00nul",
    "ünïcødé ☃ 🚀",
]


@pytest.mark.parametrize("hostile", HOSTILE)
def test_hostile_strings_are_data_not_sql(store: ClickHouseStore, hostile: str):
    doc = recent(trace_id=f"t-{hostile}"[:200], question=hostile, category=hostile[:50])
    store.insert_columns("traces", batch([doc, recent()]).columns, dedup_token=None)
    where = "WHERE trace_id = {tid:String} AND question = {q:String}"
    assert count(store, final=True, where=where, parameters={"tid": doc["trace_id"], "q": hostile}) == 1
    rows = store.query_rows(
        f"SELECT question, category FROM {store.table('traces')} FINAL WHERE category = {{c:String}}",
        {"c": doc["category"]},
    )
    assert rows == [{"question": hostile, "category": doc["category"]}]
    assert count(store, final=True) == 2  # nothing was dropped
    assert store.query_columns(
        f"SELECT trace_id FROM {store.table('traces')} WHERE trace_id IN {{ids:Array(String)}}",
        {"ids": [doc["trace_id"], "nope"]},
    )["trace_id"] == [doc["trace_id"]]


def test_table_names_are_checked(store: ClickHouseStore):
    with pytest.raises(PermanentStoreError):
        store.table("traces; DROP TABLE traces")
    with pytest.raises(PermanentStoreError):
        store.table("ragmon.traces")


def test_bad_sql_is_a_permanent_store_error(store: ClickHouseStore):
    with pytest.raises(PermanentStoreError) as info:
        store.query(f"SELECT no_such_column FROM {store.table('traces')}")
    assert "no_such_column" in str(info.value) and "\n" not in str(info.value)


def test_bad_data_is_a_permanent_store_error(store: ClickHouseStore):
    columns = batch([recent()]).columns
    columns["retrieved_ranks"] = [["not a number"]]
    with pytest.raises(PermanentStoreError):
        store.insert_columns("traces", columns, dedup_token="bad")


def test_errors_are_classified_retryable_or_permanent(store: ClickHouseStore):
    with pytest.raises(RetryableStoreError) as timeout:
        store.query("SELECT sleepEachRow(0.05) FROM numbers(40) SETTINGS max_block_size = 4",
                    settings={"max_execution_time": 0.5})
    assert "TIMEOUT_EXCEEDED" in str(timeout.value) and timeout.value.retryable
    with pytest.raises(PermanentStoreError) as missing:
        store.query("SELECT 1 FROM no_such_database.traces")
    assert not missing.value.retryable


# -- the trace row layout ----------------------------------------------------------------------------------------


def read_back(store: ClickHouseStore, trace_id: str) -> dict[str, Any]:
    [row] = store.query_rows(
        f"SELECT {SELECT_TRACE_COLUMNS} FROM {store.table('traces')} FINAL WHERE trace_id = {{t:String}}",
        {"t": trace_id},
    )
    return row_to_trace(row)


@pytest.mark.parametrize(
    "overrides",
    [
        {},
        {"feedback": {"rating": -1, "comment": "wrong policy version"}, "attributes": {"channel": "web"},
         "tags": ["a", "b"], "tenant": "acme", "user_scope": ["eu"]},
        {"retrieved": [], "context": {"chunk_ids": [], "tokens": None}, "behaviour": "refuse", "citations": [],
         "latency_ms": {}, "answer": "I can't find that."},
        {"retriever": {"name": "dense", "version": "v3", "variant": "shadow",
                       "parameters": {"k": 8, "alpha": 0.25, "rerank": True, "model": "e5"}}},
    ],
    ids=["factory", "feedback-and-attributes", "refusal-empty", "shadow-params"],
)
def test_row_to_trace_round_trips_into_a_valid_trace(store: ClickHouseStore, overrides: dict[str, Any]):
    doc = recent(**overrides)
    store.insert_columns("traces", batch([doc]).columns, dedup_token=f"rt-{doc['trace_id']}")
    back = read_back(store, doc["trace_id"])
    assert Trace.model_validate_json(json.dumps(back)) == Trace.model_validate_json(json.dumps(doc))
    assert isinstance(decode_trace(json.dumps(back).encode()), DecodedTrace)


def test_timestamps_with_an_offset_are_stored_as_the_same_instant(store: ClickHouseStore):
    instant = (datetime.now(UTC) - timedelta(hours=1)).replace(microsecond=250_000)
    doc = make_trace(timestamp=instant.astimezone(timezone(timedelta(hours=5, minutes=30))).isoformat())
    store.insert_columns("traces", batch([doc]).columns)
    back = read_back(store, doc["trace_id"])
    assert datetime.fromisoformat(back["timestamp"]) == instant
    assert back["timestamp"].endswith("+00:00")


def test_retrieved_chunks_are_stored_in_rank_order(store: ClickHouseStore):
    doc = recent()
    doc["retrieved"] = list(reversed(doc["retrieved"]))
    store.insert_columns("traces", batch([doc]).columns)
    back = read_back(store, doc["trace_id"])
    assert [c["rank"] for c in back["retrieved"]] == [1, 2, 3]
    [row] = store.query_rows(
        f"SELECT top1_score, n_results, latency_total_ms FROM {store.table('traces')} WHERE trace_id = {{t:String}}",
        {"t": doc["trace_id"]},
    )
    assert row == {"top1_score": 0.82, "n_results": 3, "latency_total_ms": 661.0}


def test_extreme_but_valid_values_fit_their_columns(store: ClickHouseStore):
    doc = recent(tokens={"prompt": 4_294_967_295, "completion": 0}, cost_usd=1e300,
                 citations=[{"sentence": 4_294_967_295, "chunk_id": "policy@c41"}])
    doc["retrieved"][0]["rank"] = 1
    doc["retrieved"][2]["rank"] = 4_294_967_295
    store.insert_columns("traces", batch([doc]).columns)
    back = read_back(store, doc["trace_id"])
    assert back["tokens"]["prompt"] == 4_294_967_295 and back["retrieved"][-1]["rank"] == 4_294_967_295


# -- cluster DDL (rendering only: no server needed) ----------------------------------------------------------------


def test_cluster_setting_renders_on_cluster_and_replicated_engines():
    settings = StoreSettings(cluster="c1", database="rm")
    statements = [s for m in load_migrations() for s in render(m, settings)]
    assert statements
    for statement in statements:
        assert "ON CLUSTER c1" in statement, statement
        if "ENGINE" in statement:
            engine = statement[statement.index("ENGINE"):]
            assert engine.startswith("ENGINE = Replicated"), engine[:80]
            assert "'/clickhouse/tables/{shard}/rm/" in engine and "'{replica}'" in engine
    traces = next(s for s in statements if "rm.traces " in s)
    assert "ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/rm/traces', '{replica}', ingested_at)" in traces
    drift = next(s for s in statements if "rm.drift_checks " in s)
    assert "ENGINE = ReplicatedMergeTree('/clickhouse/tables/{shard}/rm/drift_checks', '{replica}')" in drift
    tracking = tracking_table_sql(settings)
    assert "ON CLUSTER c1" in tracking and "ReplicatedReplacingMergeTree(" in tracking


def test_without_a_cluster_nothing_is_replicated():
    statements = [s for m in load_migrations() for s in render(m, StoreSettings())]
    assert not any("ON CLUSTER" in s or "Replicated" in s for s in statements)
    assert "Replicated" not in tracking_table_sql(StoreSettings())


# -- bad DSNs and unreachable servers fail fast ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("dsn", "says"),
    [
        ("ftp://x", "scheme 'ftp' is not supported"),
        ("chdb://", "names no data directory"),
        ("chdb:///", "names no data directory"),
        ("chdb://memory", "names no data directory"),
        ("http://", "has no host"),
        ("https://:8443/db", "has no host"),
        ("garbage", "scheme '(none)' is not supported"),
        ("http://h:99999/db", "is not a valid URL"),
        ("", "is not supported"),
    ],
)
def test_bad_dsn_fails_fast_with_a_clear_message(dsn: str, says: str):
    with pytest.raises(PermanentStoreError) as info:
        ClickHouseStore.open(StoreSettings(dsn=SecretStr(dsn)))
    message = str(info.value)
    assert says in message and "chdb:///absolute/dir" in message and "http(s)://" in message


def test_bad_dsn_message_masks_the_password():
    with pytest.raises(PermanentStoreError) as info:
        parse_dsn("http://u:Secret-pw@h:99999/db")
    assert "Secret-pw" not in str(info.value)


def test_dsn_parsing():
    server = parse_dsn("https://ragmon:p%40ss@ch.example:8443/analytics")
    assert (server.scheme, server.host, server.port, server.username, server.password, server.database) == (
        "https", "ch.example", 8443, "ragmon", "p@ss", "analytics")
    assert parse_dsn("chdb:///var/lib/ragmon").path == Path("/var/lib/ragmon")
    assert parse_dsn("chdb://./.ragmon/clickhouse").embedded


def test_unreachable_server_fails_fast_with_a_retryable_store_error():
    settings = StoreSettings(dsn=SecretStr("http://ragmon:pw-123@127.0.0.1:1/ragmon"), connect_timeout_seconds=5)
    with pytest.raises(RetryableStoreError) as info:
        ClickHouseStore.open(settings)
    assert "cannot reach the ClickHouse server at 127.0.0.1:1" in str(info.value)
    assert "pw-123" not in str(info.value)


def test_cli_store_migrate_on_an_unreachable_server_exits_3_with_one_line():
    result = run_ragmon("store", "migrate", env={"RAGMON_STORE__DSN": "http://u:pw-123@127.0.0.1:1/db",
                                                 "RAGMON_STORE__CONNECT_TIMEOUT_SECONDS": "5"})
    assert result.returncode == 3, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: cannot reach the ClickHouse server"), result.stderr
    assert "Traceback" not in result.stderr and "pw-123" not in result.stderr


@pytest.mark.parametrize("command", [("store", "migrate"), ("config", "check")])
def test_a_malformed_dsn_is_a_configuration_error_exit_2_without_traceback(command):
    # a DSN that cannot be a store is a wrong setting (2), not an unavailable service (3): caught when loading
    result = run_ragmon(*command, env={"RAGMON_STORE__DSN": "ftp://x"})
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert "store.dsn scheme 'ftp' is not supported" in result.stderr


def test_a_password_with_unescaped_url_characters_is_never_printed():
    for command in (("config", "show"), ("store", "status")):
        result = run_ragmon(*command, env={"RAGMON_STORE__DSN": "http://u:ab?cd#ef@host:8123/db"})
        assert result.returncode == 2 and "ab?cd" not in result.stdout + result.stderr, result.stderr
        assert "'http://u:****@host:8123/db' is not a valid URL" in result.stderr and "%3F" in result.stderr
    encoded = run_ragmon("config", "show", env={"RAGMON_STORE__DSN": "http://u:ab%3Fcd@host:8123/db"})
    assert encoded.returncode == 0 and "ab%3Fcd" not in encoded.stdout and "u:****@host:8123/db" in encoded.stdout


# -- chDB: one process per data directory --------------------------------------------------------------------------


HOLDER = """
import sys
from pydantic import SecretStr
from ragmon.config import StoreSettings
from ragmon.store import ClickHouseStore
ClickHouseStore.open(StoreSettings(dsn=SecretStr(sys.argv[1])))
print("ready", flush=True)
sys.stdin.read()  # hold the directory until the test closes stdin
"""


def test_second_process_on_a_held_chdb_directory_gets_store_locked_error(tmp_path: Path):
    dsn = f"chdb://{tmp_path / 'chdb'}"
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("RAGMON_")}
    env["PYTHONPATH"] = str(ROOT)
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, dsn], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert holder.stdout is not None
        ready, _, _ = select.select([holder.stdout], [], [], 90)  # never block the suite on a stuck holder
        assert ready and holder.stdout.readline().strip() == "ready", "the holder process did not open chDB"
        second = subprocess.run(
            [sys.executable, "-c",
             "import sys\n" + HOLDER.split("ClickHouseStore.open")[0]
             + "from ragmon.errors import StoreLockedError\n"
             "try:\n    ClickHouseStore.open(StoreSettings(dsn=SecretStr(sys.argv[1])))\n"
             "except StoreLockedError as exc:\n    print('LOCKED', exc)\n    sys.exit(7)\n",
             dsn],
            capture_output=True, text=True, timeout=90, env=env,
        )
        assert second.returncode == 7, second.stdout + second.stderr
        assert "in use by another process" in second.stdout and str(tmp_path / "chdb") in second.stdout
        cli = run_ragmon("store", "migrate", env={"RAGMON_STORE__DSN": dsn})
        assert cli.returncode == 3 and "Traceback" not in cli.stderr, cli.stderr
        assert "in use by another process" in cli.stderr and "RAGMON_STORE__DSN" in cli.stderr, cli.stderr
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        try:
            holder.wait(timeout=60)
        except subprocess.TimeoutExpired:
            holder.kill()
            raise
    # once the holder is gone the directory opens normally (nothing was corrupted)
    after = run_ragmon("store", "migrate", env={"RAGMON_STORE__DSN": dsn})
    assert after.returncode == 0, after.stderr
    assert "schema is up to date" in after.stdout, after.stdout + after.stderr


def test_one_process_cannot_open_a_second_chdb_directory(store: ClickHouseStore, tmp_path: Path):
    with pytest.raises(StoreError) as info:
        ClickHouseStore.open(StoreSettings(dsn=SecretStr(f"chdb://{tmp_path / 'other'}")))
    assert "one data directory per process" in str(info.value)


# -- property: whatever the decoder accepts, the table stores and gives back ---------------------------------------


def _normalized(doc: dict[str, Any]) -> Trace:
    """What the traces table can represent: empty optional strings and an all-empty feedback read back as null."""
    doc = json.loads(json.dumps(doc))
    for chunk in doc.get("retrieved", []):
        for key in ("text", "tenant"):
            chunk[key] = chunk.get(key) or None
    for citation in doc.get("citations", []):
        citation["quote"] = citation.get("quote") or None
    feedback = doc.get("feedback")
    if feedback is not None and feedback.get("rating") is None and not feedback.get("comment"):
        doc["feedback"] = None
    elif feedback is not None:
        feedback["comment"] = feedback.get("comment") or None
    doc["retrieved"] = sorted(doc.get("retrieved", []), key=lambda c: c["rank"])
    return Trace.model_validate_json(json.dumps(doc))


def test_any_accepted_trace_round_trips_through_the_table(store: ClickHouseStore):
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    from tests.unit.contracts.test_decode import trace_docs

    now = datetime.now(UTC).replace(microsecond=0)
    recent_ms = st.integers(min_value=-80 * 86_400_000, max_value=86_400_000).map(
        lambda ms: (now + timedelta(milliseconds=ms)).isoformat())

    ids = itertools.count()  # not st.uuids(): shrinking replays values, and a trace id must be new each time

    @settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
    @given(trace_docs, recent_ms)
    def check(doc: dict[str, Any], timestamp: str) -> None:
        doc = {**doc, "timestamp": timestamp, "trace_id": f"prop-{next(ids)}"}
        store.insert_columns("traces", batch([doc]).columns)
        back = _normalized(read_back(store, doc["trace_id"]))
        sent = _normalized(doc)
        assert back.model_dump() == sent.model_dump()

    check()


#: the engine's start-up options as it reports them: server settings, and query defaults set at start-up
ENGINE_SETTINGS_SQL = ("SELECT name, value FROM system.server_settings WHERE name IN {names:Array(String)} "
                       "UNION ALL SELECT name, value FROM system.settings WHERE name IN {names:Array(String)}")


def test_embedded_engine_is_sized_for_a_process_not_a_server(store: ClickHouseStore):
    """Merge threads and caches of the embedded engine are capped (EMBEDDED_ENGINE_OPTIONS), not ClickHouse's
    server defaults (16 merge threads, 5 GiB per cache), which grew the ingest process's memory with its data."""
    from ragmon.store.client import EMBEDDED_ENGINE_OPTIONS

    rows = store.query_rows(ENGINE_SETTINGS_SQL, {"names": list(EMBEDDED_ENGINE_OPTIONS)})
    assert {r["name"]: int(r["value"]) for r in rows} == EMBEDDED_ENGINE_OPTIONS
    assert EMBEDDED_ENGINE_OPTIONS["mark_cache_size"] < 5 << 30


def test_a_query_on_the_embedded_engine_reads_on_every_core(store: ClickHouseStore):
    """ClickHouse gives a query one thread for each GiB free under the engine's limit
    (``max_threads_min_free_memory_per_thread``), so under the default 1 GiB budget every query read its table on
    one thread (``ReadPoolInOrder``), and a drift check over 10 M traces took 11 s instead of 7. The embedded
    engine asks an eighth of its budget a thread."""
    if (os.cpu_count() or 1) < 2:
        pytest.skip("one core: one reading thread is all there is")
    rows = store.query_rows("EXPLAIN PIPELINE SELECT sum(number) FROM numbers_mt(10000000)")
    pipeline = [str(next(iter(r.values()))).strip() for r in rows]
    assert any(line.startswith("NumbersRange × ") for line in pipeline), pipeline  # one source per thread


MEMORY_PROBE = """
import json
from ragmon.config import load_settings
from ragmon.store import ClickHouseStore
store = ClickHouseStore.open(load_settings().store)
rows = store.query_rows(ENGINE_SQL, {"names": NAMES})
print(json.dumps({r["name"]: int(r["value"]) for r in rows}))
"""


def test_the_memory_setting_reaches_the_embedded_engine(tmp_path: Path):
    """``store.embedded_memory_mb`` sizes the engine's caches, its merge memory and its hard limit: read back
    from the engine itself, in a process of its own (one chDB engine per process)."""
    from ragmon.store.client import embedded_engine_options

    expected = embedded_engine_options(256)
    clean = {k: v for k, v in os.environ.items() if not k.upper().startswith("RAGMON_")}
    out = subprocess.run(
        [sys.executable, "-c",
         MEMORY_PROBE.replace("NAMES", repr(sorted(expected))).replace("ENGINE_SQL", repr(ENGINE_SETTINGS_SQL))],
        capture_output=True, text=True,
        timeout=120, env={**clean, "PYTHONPATH": str(ROOT), "RAGMON_STORE__DSN": f"chdb://{tmp_path / 'chdb'}",
                          "RAGMON_STORE__EMBEDDED_MEMORY_MB": "256"})
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(out.stdout.strip().splitlines()[-1]) == expected
    assert expected["max_server_memory_usage"] == 256 << 20
    assert expected["merges_mutations_memory_usage_soft_limit"] == 128 << 20


def test_traces_are_merged_column_by_column_from_the_first_merge(store: ClickHouseStore):
    """Migration 0008: vertical merges for every traces merge, so a merge never holds all columns of its parts."""
    ddl = store.query(f"SHOW CREATE TABLE {store.table('traces')}").result_rows[0][0]
    assert "vertical_merge_algorithm_min_rows_to_activate = 1" in ddl
    assert "vertical_merge_algorithm_min_bytes_to_activate = 0" in ddl


def test_traces_merges_wait_for_ten_parts_of_a_size(store: ClickHouseStore):
    """Migration 0015: merge_selector_base 10 (ClickHouse's default is 5), so at a steady insert rate each row is
    rewritten log 10 instead of log 5 times (~30 % fewer); the merges stay vertical (0008)."""
    ddl = store.query(f"SHOW CREATE TABLE {store.table('traces')}").result_rows[0][0]
    assert "merge_selector_base = 10" in ddl
    assert "vertical_merge_algorithm_min_rows_to_activate = 1" in ddl


def test_inserted_trace_parts_are_compact(store: ClickHouseStore):
    """Migration 0009: an ingest batch becomes one compact part (one data and one marks file for all columns),
    not a file pair per column and substream."""
    ddl = store.query(f"SHOW CREATE TABLE {store.table('traces')}").result_rows[0][0]
    assert "min_bytes_for_wide_part = 134217728" in ddl
    rows = TraceRows()
    for i in range(20):
        rows.add(decode_trace(json.dumps(make_trace(trace_id=f"compact-{i}")).encode()).trace,
                 SourcePosition("t", 0, i))
    store.insert_trace_rows(rows, dedup_token=f"compact-{uuid.uuid4()}")
    types = store.query_rows(
        "SELECT DISTINCT part_type FROM system.parts WHERE database = {db:String} AND table = 'traces' AND active",
        {"db": store.database},
    )
    assert [r["part_type"] for r in types] == ["Compact"]
