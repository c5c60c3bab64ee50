"""Kafka client options, built in one place for every role that talks to Kafka.

Owns the keyword arguments handed to kafka-python's ``KafkaConsumer`` and ``KafkaProducer`` from the ``kafka``
settings section: the bootstrap list, the security protocol and SASL credentials, the reconnect backoff, and
for consumers the group, manual commits, the earliest reset, the session timeout and the fetch sizes. Used by
the ingest consumer (``ingest/source.py``), the dead-letter producer (``ingest/dead_letter.py``) and the score
consumer (``score/sources.py``), so a fix made for one (the reconnect backoff that shortened recovery after a
broker restart) reaches all of them. Compression needs no option here: a consumer reads every codec whose library
is installed (gzip, snappy, lz4 and zstd: ragmon depends on ``kafka-python[lz4,snappy,zstd]``). It must not import
kafka-python or create a client (the adapters do); it is pure: settings in, a dict out.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ragmon.config import KafkaSettings

#: cap of kafka-python's exponential reconnect backoff (its default, 30 s, left ingest idle for up to ~20 s after
#: a broker restart, as measured by the broker-restart test)
RECONNECT_BACKOFF_MAX_MS = 1_000


def bootstrap_list(servers: str) -> list[str]:
    """``"a:9092, b:9092"`` → ``["a:9092", "b:9092"]`` (blanks and empty items dropped)."""
    return [s.strip() for s in servers.split(",") if s.strip()]


def client_options(settings: KafkaSettings, *, client_id: str) -> dict[str, Any]:
    """What every client shares: brokers, client id, security, SASL (only for a SASL protocol), reconnect backoff."""
    options: dict[str, Any] = {
        "bootstrap_servers": bootstrap_list(settings.bootstrap_servers),
        "client_id": client_id,
        "security_protocol": settings.security_protocol,
        "reconnect_backoff_max_ms": RECONNECT_BACKOFF_MAX_MS,
    }
    if settings.security_protocol.startswith("SASL_"):
        password = settings.sasl_password  # the settings loader has read sasl_password_file into it, if set
        options.update(sasl_mechanism=settings.sasl_mechanism, sasl_plain_username=settings.sasl_username,
                       sasl_plain_password=None if password is None else password.get_secret_value())
    return options


def consumer_options(settings: KafkaSettings, *, group_id: str, client_id: str) -> dict[str, Any]:
    """A consumer-group member that commits by hand after its work is stored, and never skips a message."""
    return {
        **client_options(settings, client_id=client_id),
        "group_id": group_id,
        "enable_auto_commit": False,          # commits only after the store acknowledged
        "auto_offset_reset": "earliest",      # a new group reads the whole topic, never skips
        "session_timeout_ms": settings.session_timeout_ms,
        "max_poll_records": settings.max_poll_records,
        "fetch_max_bytes": settings.fetch_max_bytes,
        "max_partition_fetch_bytes": settings.max_partition_fetch_bytes,
        "fetch_min_bytes": settings.fetch_min_bytes,
        "fetch_max_wait_ms": settings.fetch_max_wait_ms,
    }


#: how long closing a consumer may wait for its LeaveGroup request. While this member's JoinGroup is pending at the
#: coordinator (a rebalance waiting for a member that stopped polling) the request is not answered before
#: request_timeout_ms (30 s), longer than a shutdown grace period; without an answer the member expires with its
#: session instead, and nothing is lost (offsets are committed before, never at close)
CONSUMER_CLOSE_TIMEOUT_MS = 5_000

#: room for the record and batch framing around the largest dead letter produced whole
PRODUCER_HEADROOM_BYTES = 65_536


def producer_options(settings: KafkaSettings, *, client_id: str) -> dict[str, Any]:
    """The dead-letter producer: every send acknowledged by every in-sync replica, in order, and able to carry
    the largest dead letter produced whole (``kafka.dead_letter_max_message_bytes``; larger ones are cut).

    Not idempotent: kafka-python 3's idempotent producer (its default) takes the broker's MESSAGE_TOO_LARGE as
    fatal and refuses every later send, so one dead letter over the topic's limit stalled ingest for good.
    Dead letters are at-least-once anyway (no deduplication); one request in flight keeps a partition's
    letters in order across retries."""
    return {
        **client_options(settings, client_id=client_id),
        "acks": "all",
        "retries": 5,
        "enable_idempotence": False,
        "max_in_flight_requests_per_connection": 1,
        "max_request_size": settings.dead_letter_max_message_bytes + PRODUCER_HEADROOM_BYTES,
    }
