"""Producing traces the way real applications do, for the tests that need a realistic stream.

Real producers (an application's Kafka client, the OpenTelemetry Collector's Kafka exporter) batch records with
``linger_ms``, key them (by query id, or by trace id), compress the batches (gzip, snappy, lz4, zstd) and send
traces of a few KB with tens of retrieved chunks; a broken release or a hand-written script puts malformed
records in the middle of those batches. A test stream that flushes after each small record never puts two
records in one batch and misses every defect that lives there. Test plumbing only: no assertions.
"""

from __future__ import annotations

import json
import random
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from kafka import KafkaProducer

WORDS = ("consent policy refund invoice account password reset billing contract privacy data retention customer "
         "support escalation warranty shipping delivery return exchange subscription").split()

#: every compression codec Kafka has
CODECS = ("gzip", "snappy", "lz4", "zstd")


def realistic_trace(i: int, rng: random.Random, **overrides: Any) -> dict[str, Any]:
    """A valid trace of 2–6 KB with 10–50 retrieved chunks, dated within the last hour."""
    n = rng.randint(10, 50)
    retrieved = [{"chunk_id": f"d{rng.randint(0, 9999)}@c{c}", "doc_id": f"d{c}",
                  "score": round(1.0 - c * 0.015 - rng.random() * 0.01, 4), "rank": c + 1,
                  "text": " ".join(rng.choices(WORDS, k=rng.randint(1, 2)))} for c in range(n)]
    trace = {
        "trace_id": f"rt-{i}-{uuid.UUID(int=rng.getrandbits(128)).hex[:12]}", "query_id": f"q-{i}",
        "timestamp": (datetime.now(UTC) - timedelta(seconds=rng.randint(0, 3600))).isoformat(timespec="milliseconds"),
        "retriever": {"name": "hybrid", "version": "v3", "variant": "production", "parameters": {"k": n}},
        "corpus_snapshot": "2026-11-01", "index_version": "idx-42",
        "question": "How do I " + " ".join(rng.choices(WORDS, k=12)) + "?",
        "category": rng.choice(["billing", "account", "privacy", "shipping"]),
        "retrieved": retrieved,
        "context": {"chunk_ids": [r["chunk_id"] for r in retrieved[:5]], "tokens": 900},
        "answer": " ".join(rng.choices(WORDS, k=rng.randint(20, 60))),
        "citations": [{"sentence": 0, "chunk_id": retrieved[0]["chunk_id"], "quote": retrieved[0]["text"][:40]}],
        "model": {"name": "gen-model", "version": "2026-10"}, "prompt": {"id": "answer", "version": "3"},
        "latency_ms": {"retrieve": 40.0 + rng.random() * 20, "generate": 600.0 + rng.random() * 300},
        "tokens": {"prompt": 900, "completion": 80}, "cost_usd": 0.0012, "attributes": {"app": "tests"},
    }
    trace.update(overrides)
    return trace


#: malformed messages a real stream carries now and then, each with the reason ragmon gives it
MALFORMED: tuple[tuple[bytes, str], ...] = (
    (b'{"trace_id": "cut-off", "query_id": "q", "timest', "invalid_json"),
    (json.dumps({"trace_id": "no-question", "query_id": "q", "timestamp": "2026-12-01T10:00:00Z",
                 "retriever": {"name": "r"}}).encode(), "schema"),
    (b"[1, 2, 3]", "not_an_object"),
    (b"\xff\xfe\x00not utf-8", "invalid_json"),
    (b"", "invalid_json"),
)


@dataclass
class Stream:
    """What was produced: every message in order, and what each should become."""

    messages: list[tuple[bytes, bytes, list[tuple[str, bytes]]]] = field(default_factory=list)  # key, value, headers
    valid_ids: set[str] = field(default_factory=set)
    reasons: list[str] = field(default_factory=list)  # the dead-letter reason of each malformed message, in order


def realistic_stream(n: int, *, seed: int = 7, malformed_every: int = 0) -> Stream:
    """``n`` realistic traces keyed by query id, with a malformed message after every ``malformed_every``-th."""
    rng = random.Random(seed)
    out = Stream()
    for i in range(n):
        trace = realistic_trace(i, rng)
        out.messages.append((trace["query_id"].encode(), json.dumps(trace).encode(), [("app", b"tests")]))
        out.valid_ids.add(trace["trace_id"])
        if malformed_every and i % malformed_every == malformed_every // 2:
            value, reason = MALFORMED[(i // malformed_every) % len(MALFORMED)]
            out.messages.append((f"bad-{i}".encode(), value, [("app", b"tests")]))
            out.reasons.append(reason)
    return out


def real_producer(bootstrap: str, *, compression: str | None = None, linger_ms: int = 100, **options: Any
                  ) -> KafkaProducer:
    """A producer configured like an application's: batching, compressing, waiting for every replica."""
    return KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=linger_ms, batch_size=256 * 1024,
                         compression_type=compression, **options)


def send_all(producer: KafkaProducer, topic: str, messages: Iterable[tuple[bytes, bytes, list[tuple[Any, bytes]]]],
             *, partition: int | None = None) -> None:
    """Send without flushing between records (so they share batches), then flush once."""
    for key, value, headers in messages:
        producer.send(topic, value, key=key, headers=headers or None, partition=partition)
    producer.flush()
