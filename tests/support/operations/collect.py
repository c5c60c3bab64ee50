"""Reading back what the daemon kept, after it stopped: the store (with FINAL), the dead letters, the topic.

``read_store`` runs ``python -m tests.support.operations.collect`` in a fresh process (chDB allows one data
directory per process, and the harness's own process must not hold one), which prints the store's rows as JSON;
``doctor_store`` damages the stopped store on purpose (a trace deleted, one doubled, a label deleted), for the
negative control that shows the checks catch it.
``read_letters`` reads a dead-letter topic from the start (each letter's reason and source position, from the
``ragmon.*`` headers), ``read_letter_file`` the OTLP/HTTP dead-letter file, ``scan_topic`` every message of the
traces topic (native or OTLP, and the trace ids of the OTLP ones). Test plumbing only: no assertions.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tests.support.operations.records import DeadLetter, Stored, StoredTrace, TopicScan

ROOT = Path(__file__).resolve().parents[3]
HEX_ID = re.compile(rb"\b[0-9a-f]{32}\b")


def _trace_ids(value: bytes) -> tuple[str, ...]:
    """The trace ids a dead letter's value names: a native trace's ``trace_id``, OTLP trace ids in hex."""
    ids = {h.decode() for h in HEX_ID.findall(value)}
    try:
        doc = json.loads(value)
    except ValueError:
        doc = None
    if isinstance(doc, dict) and isinstance(doc.get("trace_id"), str):
        ids.add(doc["trace_id"])
    return tuple(sorted(ids))

QUERIES = {
    "traces": "SELECT trace_id, count() AS n, max(attributes['ragmon.otlp.incomplete'] = 'true') AS incomplete, "
              "any(answer) AS answer, any(source_topic) AS source FROM {db}.traces FINAL GROUP BY trace_id",
    "scores": "SELECT trace_id, judge_fingerprint AS fp, metric, count() AS n FROM {db}.scores FINAL "
              "GROUP BY trace_id, fp, metric",
    "score_status": "SELECT status, count() AS n FROM {db}.scores FINAL GROUP BY status",
    "score_failed": "SELECT trace_id, toUnixTimestamp64Milli(max(scored_at)) / 1000 AS at FROM {db}.scores FINAL "
                    "WHERE status = 'failed' GROUP BY trace_id",
    "labels": "SELECT trace_id, reviewer, note FROM {db}.review_labels FINAL",
    "triage": "SELECT week, trace_id, reviewer, cause, note FROM {db}.triage_labels FINAL",
    "outcomes": "SELECT event_id, count() AS n FROM {db}.outcomes FINAL GROUP BY event_id",
    # parts the engine set aside (a broken part found at start-up is detached, its rows no longer read)
    "detached": "SELECT table, name, reason FROM system.detached_parts WHERE database = '{db}'",
}


def _dump(dsn: str, database: str) -> dict[str, Any]:
    from pydantic import SecretStr

    from ragmon.config import StoreSettings
    from ragmon.store import ClickHouseStore

    store = ClickHouseStore.open(StoreSettings(dsn=SecretStr(dsn), database=database))
    return {name: [list(r.values()) for r in store.query_rows(sql.format(db=database))]
            for name, sql in QUERIES.items()}


def _doctor(dsn: str, database: str, spec: dict[str, Any]) -> None:
    """The real negative control's damage: one trace deleted, one stored a second time under another sort key (so
    FINAL keeps both), one review label deleted."""
    from pydantic import SecretStr

    from ragmon.config import StoreSettings
    from ragmon.store import ClickHouseStore

    store = ClickHouseStore.open(StoreSettings(dsn=SecretStr(dsn), database=database))
    traces, labels = f"{database}.traces", f"{database}.review_labels"
    store.command(f"DELETE FROM {traces} WHERE trace_id = {{t:String}}", {"t": spec["delete"]})
    store.command(f"INSERT INTO {traces} SELECT * REPLACE ('ops-doubled' AS category) FROM {traces} FINAL "
                  "WHERE trace_id = {t:String}", {"t": spec["double"]})
    store.command(f"DELETE FROM {labels} WHERE trace_id = {{t:String}} AND reviewer = {{r:String}}",
                  {"t": spec["unlabel"][0], "r": spec["unlabel"][1]})


def doctor_store(dsn: str, database: str, *, delete: str, double: str, unlabel: tuple[str, str]) -> None:
    """Damage the stopped daemon's store (``_doctor``) from a fresh process."""
    spec = json.dumps({"delete": delete, "double": double, "unlabel": list(unlabel)})
    out = subprocess.run([sys.executable, "-m", "tests.support.operations.collect", "--dsn", dsn, "--database",
                          database, "--doctor", spec], capture_output=True, text=True, timeout=600, cwd=ROOT,
                         env=dict(os.environ, PYTHONPATH=str(ROOT)))
    if out.returncode != 0:
        raise RuntimeError(f"damaging the store failed (exit {out.returncode}):\n{out.stderr[-3000:]}")


def read_store(dsn: str, database: str) -> Stored:
    out = subprocess.run([sys.executable, "-m", "tests.support.operations.collect", "--dsn", dsn, "--database",
                          database], capture_output=True, text=True, timeout=600, cwd=ROOT,
                         env=dict(os.environ, PYTHONPATH=str(ROOT)))
    if out.returncode != 0:
        raise RuntimeError(f"reading the store failed (exit {out.returncode}):\n{out.stderr[-3000:]}")
    rows = json.loads(out.stdout.strip().splitlines()[-1])
    stored = Stored()
    for trace_id, n, incomplete, answer, source in rows["traces"]:
        stored.traces[trace_id] = StoredTrace(int(n), bool(incomplete), answer, source)
    for trace_id, fp, metric, n in rows["scores"]:
        stored.scores.setdefault((trace_id, fp), {})[metric] = int(n)
    for status, n in rows["score_status"]:
        stored.score_status[status] += int(n)
    stored.score_failed = {t: float(at) for t, at in rows["score_failed"]}
    stored.labels = {(t, r): note for t, r, note in rows["labels"]}
    stored.triage = {(w, t, r): (cause, note) for w, t, r, cause, note in rows["triage"]}
    stored.outcomes = {e: int(n) for e, n in rows["outcomes"]}
    stored.detached = [f"{table}/{name} ({reason or 'no reason'})" for table, name, reason in rows["detached"]]
    return stored


def _consume_all(bootstrap: str, topic: str) -> list[Any]:
    """Every record of ``topic``, from the start to the end offsets read first."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, request_timeout_ms=30_000)
    try:
        parts = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or ())]
        if not parts:
            return []
        consumer.assign(parts)
        consumer.seek_to_beginning(*parts)
        ends = consumer.end_offsets(parts)
        records: list[Any] = []
        deadline = time.monotonic() + 300
        while any(consumer.position(tp) < ends[tp] for tp in parts) and time.monotonic() < deadline:
            for batch in consumer.poll(timeout_ms=1000, max_records=5000).values():
                records.extend(batch)
        return records
    finally:
        consumer.close()


def read_letters(bootstrap: str, topic: str) -> list[DeadLetter]:
    out = []
    for m in _consume_all(bootstrap, topic):
        headers = {k: v.decode("utf-8", "replace") for k, v in (m.headers or [])}
        out.append(DeadLetter(headers.get("ragmon.source.topic", ""), int(headers.get("ragmon.source.partition", -1)),
                              int(headers.get("ragmon.source.offset", -1)), headers.get("ragmon.reason", ""),
                              _trace_ids(m.value or b"")))
    return out


def read_letter_file(path: Path) -> list[DeadLetter]:
    if not path.exists():
        return []
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        letter = json.loads(line)
        source = letter.get("source", {})
        value = (letter.get("value") or "").encode()
        out.append(DeadLetter(source.get("topic", ""), int(source.get("partition", 0)), int(source.get("offset", 0)),
                              letter.get("reason", ""), _trace_ids(value)))
    return out


def scan_topic(bootstrap: str, topic: str) -> TopicScan:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    from ragmon.pipeline.spans.otlp import detect_format

    scan = TopicScan()
    for m in _consume_all(bootstrap, topic):
        scan.messages += 1
        value = m.value or b""
        if detect_format(value) == "otlp_proto":
            scan.otlp += 1
            request = ExportTraceServiceRequest.FromString(value)
            scan.otlp_trace_ids |= {s.trace_id.hex() for rs in request.resource_spans for ss in rs.scope_spans
                                    for s in ss.spans}
        else:
            scan.native += 1
    return scan


def main() -> None:
    parser = argparse.ArgumentParser(description="Print the store's rows the operations checks need, as JSON.")
    parser.add_argument("--dsn", required=True)
    parser.add_argument("--database", default="ragmon")
    parser.add_argument("--doctor", help="JSON: damage the store this way (the negative control) instead")
    args = parser.parse_args()
    if args.doctor:
        _doctor(args.dsn, args.database, json.loads(args.doctor))
        return
    print(json.dumps(_dump(args.dsn, args.database), default=str))


if __name__ == "__main__":
    main()
