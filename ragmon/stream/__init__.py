"""What every role that consumes a topic shares: where raw messages come from (``source``: the ``TraceSource``
contract, Kafka, an in-memory double, the missing-topic warning; ``kafka_records``: reading records whose header
keys are not UTF-8) and the consumer lag they report (``lag``). The ingest, outcome and score loops use it.

Sits below the roles and imports none of them; must not decode, store or decide what is committable.
"""
