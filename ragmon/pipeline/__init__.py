"""The trace loop, behind the ingest role (Kafka, files) and the otlp role (OTLP/HTTP): every valid trace stored
exactly once (as read with FINAL), an offset committed only after the store acknowledged what it covers.

One step each knowing only the next (``loop.py`` composes them)::

    source.poll ──► Intake.handle ──► BatchStep ──► WriteStep ──► CommitStep

    loop.py           IngestPipeline: poll, pause while a write fails (backpressure), rebalance, shutdown
    intake.py         per message: decode (native / OTLP), validate, redact, assemble, track obligations; the
                      redaction settings' start-up check
    batcher.py        one insert's worth of rows (JSON lines, see store/trace_json.py) and dead letters, its
                      dedup token; BatchStep fills it and hands it on when full or due
    write_step.py     WriteStep: one write in flight (writer thread), retry of a failed batch, dead letters after
                      the insert
    commit_step.py    CommitStep: an acknowledged batch closes its obligations; commit what became safe
    offsets.py        the commit rule: which offsets are safe to commit
    stats.py          IngestStats: what the loop did
    writer.py         TraceWriter: the store seam (ClickHouse, in-memory)
    faults.py         test-only fault points for kill -9 tests
    spans/            OTLP spans → trace.v1 documents: decoding (``otlp.py``), assembly by trace id and repairs
                      (``otlp_assembly.py``), the OpenInference mapping (``openinference*.py``) and the other
                      conventions read as OpenInference (``conventions.py``, ``openllmetry.py``, ``genai.py``,
                      ``pydantic_ai.py``)

Sources, dead-letter sinks, lag and backoff are ``ragmon.stream``. Sits below the roles and imports none of them;
must not choose its source or bind a port (the roles do).
"""
