"""The ingest role: Kafka (or a JSON Lines file) → ClickHouse, every valid trace stored exactly once (as read with
FINAL).

    role.py           the ``ingest`` role from settings, its health checks (``ragmon ingest``, ``ragmon run``)
    file_input.py     load_file: one run of the loop over a file, with its summary (``ragmon ingest --file``)

The loop itself (poll → intake → batch → write → commit, with OTLP span assembly) is ``ragmon.pipeline``, which
the ``otlp`` role (``ragmon.otlp``) runs too; the Kafka source, dead letters and lag are ``ragmon.stream``; Kafka
client options come from ``ragmon/kafka_options.py``. See docs/ingest.md and docs/otlp.md.
"""
