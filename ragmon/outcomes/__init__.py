"""The outcomes role: A/B outcome events (``schemas/outcome.v1``) from ``ab.outcomes_topic`` into the ``outcomes``
table, with the trace loop's guarantees (``loop``); ``role`` is how a process starts it (``roles.outcomes``,
``ragmon ingest --outcomes``). What it shares with the trace loop (sources, lag, dead letters, backoff) is
``ragmon.stream``."""
