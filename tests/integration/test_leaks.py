"""Permission leaks end to end: counted on every trace ingested from the real Kafka broker into chDB, exported as
``ragmon_permission_leaks_total``, and listed by ``ragmon leaks list`` without the chunk text.

The Kafka test runs the pipeline in a thread against the session's chDB engine; the CLI test runs ``ragmon
ingest --file`` and ``ragmon leaks list`` as subprocesses with their own chDB directory (one engine per process).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from ragmon.leaks.listing import list_leaks
from ragmon.metrics.permissions import LeakedChunk, LeakRule
from tests.conftest import make_trace
from tests.integration.ingest_support import ROOT, Running, committed, kafka_settings, produce, wait_for

SECRET = "Globex payroll: the CFO's salary is 1.2M"


def _chunk(chunk_id: str, tenant: str | None, rank: int, text: str = "a passage") -> dict[str, Any]:
    return {"chunk_id": chunk_id, "doc_id": chunk_id.split("@")[0], "score": 1.0 / rank, "rank": rank,
            "text": text, "tenant": tenant}


def batch_with_one_leak(n: int) -> tuple[list[dict[str, Any]], str]:
    """``n`` valid traces of tenant acme (own and shared chunks, one untenanted, one without a user tenant) and one
    leaking trace whose rank-2 chunk belongs to globex."""
    docs = [make_trace(trace_id=f"ok-{i}", tenant="acme", category=("billing", "consent")[i % 2],
                       retrieved=[_chunk("acme@1", "acme", 1), _chunk("kb@7", "public", 2), _chunk("x@1", None, 3)])
            for i in range(n)]
    docs.append(make_trace(trace_id="no-user-tenant", tenant="", retrieved=[_chunk("globex@3", "globex", 1)]))
    leak = make_trace(trace_id="leaky", tenant="acme", category="billing",
                      retrieved=[_chunk("acme@2", "acme", 1), _chunk("globex@9", "globex", 2, SECRET),
                                 _chunk("kb@7", "public", 3)])
    docs.insert(n // 2, leak)
    return docs, "leaky"


@pytest.mark.kafka
def test_one_leaking_trace_among_valid_ones_is_counted_stored_exported_and_listed(kafka_bootstrap, new_topic,
                                                                                  store) -> None:
    topic = new_topic(3)
    group = f"g-{topic}"
    docs, leaky = batch_with_one_leak(40)
    produce(kafka_bootstrap, topic, [json.dumps(d).encode() for d in docs])
    run = Running(store, kafka_settings(kafka_bootstrap, topic, group), shared_tenants=["public"])
    try:
        wait_for(lambda: run.pipeline.idle() and sum(committed(kafka_bootstrap, group).values()) == len(docs),
                 60, "every trace stored and committed")
        # the producer sends the leaking trace again (a retry): stored again, one row under FINAL, counted once
        again = next(d for d in docs if d["trace_id"] == leaky)
        produce(kafka_bootstrap, topic, [json.dumps(again).encode()])
        wait_for(lambda: run.pipeline.idle() and sum(committed(kafka_bootstrap, group).values()) == len(docs) + 1,
                 60, "the re-sent trace stored and committed")
    finally:
        run.close()
    stored = dict(store.query(f"SELECT trace_id, permission_leaks FROM {store.table('traces')} FINAL").result_rows)
    assert len(stored) == len(docs)
    assert {t: n for t, n in stored.items() if n} == {leaky: 1}  # shared, own, untenanted, no user tenant: no leak
    labels = {"retriever": "hybrid@v1", "variant": "production", "stratum": "billing"}
    assert run.metric("ragmon_permission_leaks_total", labels) == 1
    assert run.metric("ragmon_permission_leaks_total", {**labels, "stratum": "consent"}) == 0

    now = datetime.now(UTC)
    listing = list_leaks(store, LeakRule.sharing(["public"]), since=now - timedelta(hours=1), until=now + timedelta(1))
    assert (listing.total_traces, listing.total_leaks) == (1, 1)
    [trace] = listing.traces
    assert (trace.trace_id, trace.stratum, trace.user_tenant, trace.retriever) == (leaky, "billing", "acme", "hybrid@v1")
    assert trace.chunks == (LeakedChunk("globex@9", "globex"),)
    assert SECRET not in json.dumps(listing.as_dict())  # never the chunk text
    empty = list_leaks(store, LeakRule(), since=now - timedelta(hours=1), until=now + timedelta(1), stratum="consent")
    assert empty.total_traces == 0 and empty.traces == ()


def _ragmon(chdb: Path, *args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ, RAGMON_STORE__DSN=f"chdb://{chdb}", PYTHONPATH=str(ROOT), COLUMNS="200",
               RAGMON_INGEST__SHARED_TENANTS='["public"]')
    return subprocess.run([sys.executable, "-m", "ragmon", *args], input=stdin, capture_output=True, timeout=300,
                          cwd=ROOT, env=env)


def test_leaks_list_prints_json_and_a_table_without_the_text(tmp_path: Path) -> None:
    chdb = tmp_path / "chdb"
    docs, leaky = batch_with_one_leak(10)
    path = tmp_path / "traces.jsonl"
    path.write_text("\n".join(json.dumps(d) for d in docs) + "\n")
    ingested = _ragmon(chdb, "ingest", "--file", str(path))
    assert ingested.returncode == 0, ingested.stderr.decode()[-3000:]
    assert b"permission leaks: 1 chunk(s) of another tenant" in ingested.stderr

    listed = _ragmon(chdb, "leaks", "list", "--since", "1h", "--format", "json")
    assert listed.returncode == 0, listed.stderr.decode()[-3000:]
    out = json.loads(listed.stdout)
    assert out["total_traces"] == 1 and out["shared_tenants"] == ["public"]
    [trace] = out["traces"]
    assert trace["trace_id"] == leaky and trace["chunks"] == [{"chunk_id": "globex@9", "tenant": "globex"}]
    assert SECRET.encode() not in listed.stdout

    table = _ragmon(chdb, "leaks", "list", "--since", "1h")
    assert table.returncode == 0 and b"globex@9 (globex)" in table.stdout and SECRET.encode() not in table.stdout
    none = _ragmon(chdb, "leaks", "list", "--since", "1h", "--stratum", "consent")
    assert none.returncode == 0 and b"no permission leaks" in none.stdout and b"no trace at all" not in none.stderr
    typo = _ragmon(chdb, "leaks", "list", "--since", "1h", "--stratum", "consnet")  # a typo is not an all-clear
    assert typo.returncode == 0 and b"no trace at all of stratum 'consnet'" in typo.stderr
    bad = _ragmon(chdb, "leaks", "list", "--since", "yesterday-ish")
    assert bad.returncode == 2 and b"--since" in bad.stderr


def test_a_filter_that_matches_nothing_warns_in_json_too(tmp_path: Path) -> None:
    """A misspelt stratum or retriever is not an all-clear, in either format: the JSON carries the warning and
    stderr says it."""
    chdb = tmp_path / "chdb"
    docs, _ = batch_with_one_leak(4)
    path = tmp_path / "traces.jsonl"
    path.write_text("\n".join(json.dumps(d) for d in docs) + "\n")
    assert _ragmon(chdb, "ingest", "--file", str(path)).returncode == 0
    typo = _ragmon(chdb, "leaks", "list", "--since", "1h", "--stratum", "consnet", "--format", "json")
    assert typo.returncode == 0
    assert b"no trace at all of stratum 'consnet'" in typo.stderr
    out = json.loads(typo.stdout)
    assert out["total_traces"] == 0 and any("stratum 'consnet'" in w for w in out["warnings"])
    fine = json.loads(_ragmon(chdb, "leaks", "list", "--since", "1h", "--stratum", "consent", "--format",
                              "json").stdout)
    assert fine["warnings"] == []
    wrong = _ragmon(chdb, "leaks", "list", "--since", "1h", "--retriever", "hybird", "--format", "json")
    assert any("retriever 'hybird'" in w for w in json.loads(wrong.stdout)["warnings"])
