"""The ingest role: Kafka → ClickHouse, every valid trace stored exactly once (as read with FINAL).

    source.py         TraceSource: KafkaTraceSource (kafka-python consumer group), InMemoryTraceSource
    intake.py         per message: decode (native / OTLP), validate, redact, assemble, track obligations
    otlp.py           OTLP protobuf/JSON → spans; OpenInference spans → a trace.v1 document
    otlp_assembly.py  spans of one trace buffered by trace id (bounded wait and memory)
    offsets.py        the commit rule: which offsets are safe to commit
    batcher.py        one insert's worth of rows (JSON lines, see store/trace_json.py) and dead letters, and its dedup token
    writer.py         TraceWriter: the store seam (ClickHouse, in-memory)
    dead_letter.py    DeadLetterSink: Kafka producer with reason headers, in-memory
    redact.py         named patterns over configured fields, counted
    pipeline.py       the loop: write, retry with backoff, pause (backpressure), commit, rebalance, shutdown
    role.py           wiring from settings, health checks (for `ragmon ingest` and `ragmon run`)
    faults.py         test-only fault points for kill -9 tests

See docs/ingest.md and docs/otlp.md.
"""
