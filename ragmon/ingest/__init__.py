"""The ingest role: Kafka → ClickHouse, every valid trace stored exactly once (as read with FINAL); and the same loop
behind the OTLP/HTTP receiver (the ``otlp`` role).

The loop, one step each knowing only the next (``pipeline.py`` composes them)::

    source.poll ──► Intake.handle ──► BatchStep ──► WriteStep ──► CommitStep

    pipeline.py       the loop: poll, pause while a write fails (backpressure), rebalance, shutdown
    intake.py         per message: decode (native / OTLP), validate, redact, assemble, track obligations
    batcher.py        one insert's worth of rows (JSON lines, see store/trace_json.py) and dead letters, its
                      dedup token; BatchStep fills it and hands it on when full or due
    write_step.py     WriteStep: one write in flight (writer thread), retry of a failed batch, dead letters after
                      the insert
    commit_step.py    CommitStep: an acknowledged batch closes its obligations; commit what became safe
    backoff.py        Backoff: bounded exponential retry delays with jitter
    lag.py            LagReporter: consumer-lag gauges, caught_up
    stats.py          IngestStats: what the loop did
    offsets.py        the commit rule: which offsets are safe to commit
    source.py         TraceSource: KafkaTraceSource (kafka-python consumer group), InMemoryTraceSource
    kafka_records.py  reading a record whose header key is not UTF-8 (kafka-python fails on its whole batch)
    file_source.py    FileTraceSource: JSON Lines files or standard input (``ragmon ingest --file``)
    fd_lines.py       DescriptorLines: standard input's lines without a buffered reader (a stop never hangs)
    writer.py         TraceWriter: the store seam (ClickHouse, in-memory)
    dead_letter.py    DeadLetterSink: Kafka producer with reason headers (too-large letters cut), in-memory
    dead_letter_file.py  FileDeadLetterSink: dead letters as JSON Lines
    file_input.py     load_file: one run of the loop over a file, with its summary
    otlp.py           OTLP protobuf/JSON → spans
    otlp_assembly.py  spans of one trace buffered by trace id (waiting for the root up to the longest query, bounded
                      memory), late spans repaired, a rootless trace dead-lettered, each trace's final outcome
    openinference.py  OpenInference spans of one trace → a trace.v1 document, or why it is not a query
    openinference_texts.py, openinference_documents.py  its question/answer texts, its chunks
    conventions.py    which convention a span follows; the span as the mapping reads it (OpenInference attributes)
    openllmetry.py    OpenLLMetry's traceloop.* spans (retrievers, rerankers, inputs and outputs) read as OpenInference
    genai.py          GenAI semantic-convention gen_ai.* spans (model calls, retrieval, workflows, tools whose result is
                      documents) read as OpenInference
    pydantic_ai.py    Pydantic AI's agent runs (pydantic_ai.all_messages, final_result): the question and the answer
    http_source.py    HttpTraceSource: requests accepted by the OTLP/HTTP receiver, as a source (offsets in the spool)
    http_spool.py     HttpSpool: the receiver's write-ahead log of accepted requests, replayed after a restart
    otlp_http.py      POST /v1/traces: token, limits, decoding, partial_success, 503 while writes fail or the spool
                      is full
    otlp_role.py      the ``otlp`` role (``ragmon run``, ``ragmon ingest --otlp-http``): receiver + loop
    redact.py         named patterns over configured fields, counted
    role.py           wiring from settings, health checks (for `ragmon ingest` and `ragmon run`)
    faults.py         test-only fault points for kill -9 tests

Kafka client options come from ``ragmon/kafka_options.py`` (shared with the score role). See docs/ingest.md and
docs/otlp.md.
"""
