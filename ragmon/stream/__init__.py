"""What every role that consumes messages shares: where raw messages come from (``source``: the ``TraceSource``
contract, Kafka, an in-memory double, the missing-topic warning; ``kafka_records``: reading records whose header
keys are not UTF-8; ``file_source`` with ``fd_lines``: a JSON-lines file or stdin), where the ones a loop rejects go
(``dead_letter``: Kafka and in-memory sinks; ``dead_letter_file``: a file), the consumer lag they report (``lag``)
and the retry delays of a loop that waits for the store (``backoff``). The ingest, outcome and score loops use it.

Sits below the roles and imports none of them; must not decode, store or decide what is committable.
"""
