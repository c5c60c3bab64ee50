"""The traffic of the operations scenario: what applications send the daemon while it is under faults.

- ``NativeTraffic``: native traces (schemas/trace.v1, ``tests/support/producers.realistic_trace``: 2–6 KB, 10–50
  chunks) keyed by query id, every tenth query with a shadow twin, and now and then a malformed message (each with
  the dead-letter reason ragmon must give it), through three batching producers as applications configure them
  (``linger_ms``, ``batch_size``, idempotent, ``acks=all``), compressed gzip, zstd and lz4 in turn; with outcome
  events (schemas/outcome.v1, a few invalid) for some queries on the outcomes topic. A message counts as sent once
  the broker acknowledged it (the producers keep retrying through a broker restart).
- ``OtlpApp``: ``rag_app.py`` as a process of its own (the real LlamaIndex and OpenInference instrumentation)
  following a plan of questions and LLM latencies, exporting to one endpoint; ``sent()`` reads its journal.
- ``otlp_plan``: such a plan: mostly short LLM calls, some of several seconds, and the slow ones asked for.

Test plumbing only: no assertions.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import threading
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kafka import KafkaProducer

from tests.support.operations.records import OtlpSent, Sent
from tests.support.producers import MALFORMED, realistic_trace

ROOT = Path(__file__).resolve().parents[3]
CODECS = ("gzip", "zstd", "lz4")
QUESTIONS = ("How long do refunds take?", "Is shipping free?", "How are passwords reset?", "Where are invoices sent?",
             "Can I return a parcel after two weeks?", "When is my invoice sent?")
#: invalid outcome events and the reason the outcome loop gives each
BAD_OUTCOMES = ((b'{"query_id": "q", "kind": "bogus", "time": "2026-12-01T10:00:00Z"}', "schema"),
                (b"{not json", "invalid_json"))


def producer(bootstrap: str, compression: str) -> KafkaProducer:
    """A producer configured as an application's: batching, compressing, idempotent, retrying for two minutes."""
    return KafkaProducer(bootstrap_servers=bootstrap, acks="all", enable_idempotence=True, linger_ms=50,
                         batch_size=64 * 1024, compression_type=compression, delivery_timeout_ms=180_000,
                         request_timeout_ms=15_000, reconnect_backoff_max_ms=1000)


class NativeTraffic(threading.Thread):
    """Native traces at ``per_second`` until ``stop`` (or ``seconds``), and outcome events for a share of them."""

    def __init__(self, bootstrap: str, topic: str, outcomes_topic: str, *, per_second: float, seconds: float,
                 malformed_every: int = 150, outcome_share: float = 0.3, seed: int = 30):
        super().__init__(name="ops-native-traffic", daemon=True)
        self.topic, self.outcomes_topic = topic, outcomes_topic
        self.per_second, self.seconds = per_second, seconds
        self.malformed_every, self.outcome_share = malformed_every, outcome_share
        self.rng = random.Random(seed)
        self.producers = [producer(bootstrap, c) for c in CODECS]
        self.stop = threading.Event()
        self.sent = Sent()
        self.pending: list[tuple[Any, str, Any]] = []  # (future, kind, detail)
        self.error: BaseException | None = None

    def _send(self, i: int, value: bytes, key: bytes | None, kind: str, detail: Any, topic: str | None = None) -> None:
        future = self.producers[i % len(self.producers)].send(topic or self.topic, value, key=key)
        self.pending.append((future, kind, detail))

    def run(self) -> None:
        try:
            self._run()
        except BaseException as exc:  # noqa: BLE001 - reported by the harness
            self.error = exc

    def _run(self) -> None:
        start, i, bad = time.monotonic(), 0, 0
        while not self.stop.is_set() and time.monotonic() - start < self.seconds:
            due = int((time.monotonic() - start) * self.per_second)
            while i < due:
                now = datetime.now(UTC).isoformat(timespec="milliseconds")
                trace = realistic_trace(i, self.rng, trace_id=f"ops-{i:07d}", query_id=f"opsq-{i:07d}", timestamp=now,
                                        retriever={"name": "hybrid", "version": "v1", "variant": "production",
                                                   "parameters": {"k": 20}})
                self._send(i, json.dumps(trace).encode(), trace["query_id"].encode(), "native",
                           (trace["trace_id"], trace["query_id"]))
                if i % 10 == 3:  # a shadow twin: the same query through the candidate retriever
                    twin = dict(trace, trace_id=f"ops-{i:07d}-shadow",
                                retriever={"name": "hybrid", "version": "v2", "variant": "shadow", "parameters": {"k": 20}})
                    self._send(i, json.dumps(twin).encode(), trace["query_id"].encode(), "native",
                               (twin["trace_id"], twin["query_id"]))
                if self.malformed_every and i % self.malformed_every == self.malformed_every // 2:
                    value, reason = MALFORMED[bad % len(MALFORMED)]
                    bad += 1
                    self._send(i, value, f"bad-{i}".encode(), "invalid", reason)
                if self.rng.random() < self.outcome_share:
                    event = {"query_id": trace["query_id"], "kind": self.rng.choice(["citation_opened", "resolved",
                                                                                      "reformulated", "feedback"]),
                             "time": now, "value": self.rng.choice([1, -1]), "event_id": f"ev-{i:07d}"}
                    self._send(i, json.dumps(event).encode(), trace["query_id"].encode(), "outcome",
                               event["event_id"], self.outcomes_topic)
                if self.malformed_every and i % self.malformed_every == 7:
                    value, reason = BAD_OUTCOMES[bad % len(BAD_OUTCOMES)]
                    self._send(i, value, None, "invalid_outcome", reason, self.outcomes_topic)
                i += 1
            self.stop.wait(0.02)

    def finish(self, timeout: float = 240.0) -> Sent:
        """Stop sending, wait for every acknowledgement, and return what the broker acknowledged."""
        self.stop.set()
        self.join(30)
        for p in self.producers:
            p.flush(timeout)
        for future, kind, detail in self.pending:
            try:
                meta = future.get(timeout=1)
            except Exception:  # noqa: BLE001 - never acknowledged: not sent
                self.sent.not_acked += 1
                continue
            if kind == "native":
                self.sent.native[detail[0]] = detail[1]
            elif kind == "invalid":
                self.sent.invalid[(meta.partition, meta.offset)] = detail
            elif kind == "outcome":
                self.sent.outcomes.add(detail)
            else:
                self.sent.invalid_outcomes[(meta.partition, meta.offset)] = detail
        for p in self.producers:
            p.close(timeout=10)
        return self.sent


def otlp_plan(seconds: float, *, per_minute: float, slow: list[tuple[float, float]], seed: int) -> list[dict[str, Any]]:
    """Questions at ``per_minute`` over ``seconds``: LLM calls mostly 0.1–3 s, one in ten 5–30 s; plus the ``slow``
    ones as (at, llm seconds). Every query ends before ``seconds`` plus its LLM time."""
    rng = random.Random(seed)
    plan, t = [], 1.0
    while t < seconds:
        llm = rng.uniform(5, 30) if rng.random() < 0.1 else rng.uniform(0.1, 3.0)
        plan.append({"at": round(t, 2), "llm_seconds": round(llm, 2), "question": rng.choice(QUESTIONS)})
        t += rng.expovariate(per_minute / 60.0)
    plan += [{"at": at, "llm_seconds": llm, "question": rng.choice(QUESTIONS)} for at, llm in slow]
    return sorted(plan, key=lambda e: e["at"])


class OtlpApp:
    """``rag_app.py`` in its own process, exporting to ``endpoint``; ``path`` names the route for the report."""

    def __init__(self, path: str, endpoint: str, plan: list[dict[str, Any]], workdir: Path):
        self.path, self.endpoint = path, endpoint
        self.plan_file = workdir / f"plan-{path}.json"
        self.plan_file.write_text(json.dumps(plan), encoding="utf-8")
        self.journal = workdir / f"sent-{path}.jsonl"
        self.log = workdir / f"app-{path}.log"
        self.journal.unlink(missing_ok=True)
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> OtlpApp:
        with self.log.open("wb") as log:
            self.proc = subprocess.Popen([sys.executable, "-m", "tests.support.operations.rag_app", "--endpoint",
                                          self.endpoint, "--plan", str(self.plan_file), "--out", str(self.journal)],
                                         cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
        return self

    def wait(self, timeout: float) -> int | None:
        assert self.proc is not None
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def records(self) -> list[dict[str, Any]]:
        if not self.journal.exists():
            return []
        return [json.loads(line) for line in self.journal.read_text(encoding="utf-8").splitlines() if line.strip()]

    def sent(self) -> tuple[dict[str, OtlpSent], dict[str, str]]:
        """(queries by trace id, the traces that are not queries of which the endpoint accepted a span)."""
        records = self.records()
        spans: Counter[str] = Counter()
        accepted: Counter[str] = Counter()
        for r in records:
            if r["kind"] == "export":
                for trace_id, n in r["traces"].items():
                    spans[trace_id] += n
                    if r["ok"]:
                        accepted[trace_id] += n
        done = next((r for r in records if r["kind"] == "done"), None)
        if done is not None:  # every span the app ended, exported or not
            spans = Counter(done["spans"])
        queries = {r["trace_id"]: OtlpSent(r["trace_id"], self.path, r["question"], r["answer"], r["llm_seconds"],
                                           r["started"], r["ended"], spans[r["trace_id"]], accepted[r["trace_id"]])
                   for r in records if r["kind"] == "query"}
        for r in records:  # a query still running when the app stopped: its root never ended, so it is partial
            if r["kind"] == "root" and r["name"].endswith("QueryEngine.query") and r["trace_id"] not in queries:
                queries[r["trace_id"]] = OtlpSent(r["trace_id"], self.path, "", "", float("nan"), r["at"], 0.0,
                                                  accepted[r["trace_id"]] + 1, accepted[r["trace_id"]])
        others = {r["trace_id"]: self.path for r in records
                  if r["kind"] == "root" and r["trace_id"] not in queries and accepted[r["trace_id"]] > 0}
        return queries, others
