"""The otlp role: OTLP/HTTP ``POST /v1/traces`` on its own port, into the store through the same trace loop as Kafka
input (``ragmon.pipeline``).

    role.py           the ``otlp`` role (``ragmon run``, ``ragmon ingest --otlp-http``): receiver + loop
    receiver.py       POST /v1/traces: token, limits, decoding, partial_success, 503 while writes fail or the spool
                      is full
    http_source.py    HttpTraceSource: requests the receiver accepted, as the loop's source (offsets in the spool)
    http_spool.py     HttpSpool: the receiver's write-ahead log of accepted requests, replayed after a restart

See docs/otlp.md.
"""
