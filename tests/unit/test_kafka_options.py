"""The Kafka client options every role builds from the ``kafka`` settings (ragmon/kafka_options.py)."""

from __future__ import annotations

from typing import Any

import kafka
import pytest
from pydantic import SecretStr

from ragmon.config import KafkaSettings
from ragmon.kafka_options import RECONNECT_BACKOFF_MAX_MS, consumer_options, producer_options

SASL = {"security_protocol": "SASL_SSL", "sasl_mechanism": "SCRAM-SHA-512", "sasl_username": "ragmon",
        "sasl_password": SecretStr("s3cret")}


def test_a_consumer_commits_by_hand_starts_at_the_earliest_offset_and_caps_the_reconnect_backoff():
    o = consumer_options(KafkaSettings(bootstrap_servers="k0:9092, k1:9092 ,", session_timeout_ms=7000),
                         group_id="g", client_id="c")
    assert o["bootstrap_servers"] == ["k0:9092", "k1:9092"]
    assert (o["group_id"], o["client_id"]) == ("g", "c")
    assert o["enable_auto_commit"] is False and o["auto_offset_reset"] == "earliest"
    assert o["session_timeout_ms"] == 7000
    assert o["reconnect_backoff_max_ms"] == RECONNECT_BACKOFF_MAX_MS
    assert o["security_protocol"] == "PLAINTEXT" and not any(k.startswith("sasl") for k in o)


def test_sasl_credentials_reach_consumers_and_producers_with_the_password_revealed():
    settings = KafkaSettings(**SASL)
    for o in (consumer_options(settings, group_id="g", client_id="c"), producer_options(settings, client_id="p")):
        assert o["security_protocol"] == "SASL_SSL"
        assert (o["sasl_mechanism"], o["sasl_plain_username"], o["sasl_plain_password"]) == \
            ("SCRAM-SHA-512", "ragmon", "s3cret")


def test_ssl_without_sasl_passes_no_sasl_options():
    o = consumer_options(KafkaSettings(security_protocol="SSL", sasl_mechanism="PLAIN"), group_id="g", client_id="c")
    assert o["security_protocol"] == "SSL" and not any(k.startswith("sasl") for k in o)


def test_the_producer_waits_for_every_replica_keeps_order_and_fits_the_largest_whole_dead_letter():
    o = producer_options(KafkaSettings(dead_letter_max_message_bytes=4_194_304), client_id="p")
    assert o["acks"] == "all" and o["max_request_size"] > 4_194_304
    assert o["reconnect_backoff_max_ms"] == RECONNECT_BACKOFF_MAX_MS
    # not idempotent: kafka-python's idempotent producer stays failed after one MESSAGE_TOO_LARGE; one request
    # in flight keeps the letters of a partition in order across retries
    assert o["enable_idempotence"] is False and o["max_in_flight_requests_per_connection"] == 1


def test_every_option_is_one_kafka_python_knows():
    # kafka-python refuses unknown options at construction (KafkaConfigurationError)
    settings = KafkaSettings(**SASL)
    assert set(consumer_options(settings, group_id="g", client_id="c")) <= set(kafka.KafkaConsumer.DEFAULT_CONFIG)
    assert set(producer_options(settings, client_id="p")) <= set(kafka.KafkaProducer.DEFAULT_CONFIG)


class _Recorder:
    """Stands in for kafka-python's client classes: records the options it was built with."""

    built: list[dict[str, Any]] = []

    def __init__(self, *topics: str, **options: Any):
        _Recorder.built.append(options)

    def subscribe(self, topics: list[str], listener: Any = None) -> None:
        pass

    def partitions_for_topic(self, topic: str) -> set[int]:
        return {0}


@pytest.fixture
def recorded(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    _Recorder.built = []
    monkeypatch.setattr(kafka, "KafkaConsumer", _Recorder)
    monkeypatch.setattr(kafka, "KafkaProducer", _Recorder)
    return _Recorder.built


def test_the_ingest_consumer_the_score_consumer_and_the_dead_letter_producer_all_use_them(recorded):
    from ragmon.score.sources import KafkaScoreSource
    from ragmon.stream.dead_letter import KafkaDeadLetterSink
    from ragmon.stream.source import KafkaTraceSource

    settings = KafkaSettings(**SASL)
    KafkaTraceSource(settings)
    KafkaScoreSource(settings, topic="rag.traces", group_id="ragmon-score", max_records=10, poll_timeout_seconds=1)
    KafkaDeadLetterSink(settings)
    ingest, score, dlq = recorded
    assert ingest == consumer_options(settings, group_id=settings.group_id, client_id="ragmon-ingest")
    assert score == consumer_options(settings, group_id="ragmon-score", client_id="ragmon-score")
    assert dlq == producer_options(settings, client_id="ragmon-ingest-dlq")


def test_fetch_waits_reach_the_consumer_as_options_kafka_python_knows():
    """``kafka.fetch_min_bytes`` / ``fetch_max_wait_ms``: fewer, bigger fetches at a steady low rate."""
    o = consumer_options(KafkaSettings(fetch_min_bytes=65_536, fetch_max_wait_ms=100), group_id="g", client_id="c")
    assert (o["fetch_min_bytes"], o["fetch_max_wait_ms"]) == (65_536, 100)
    assert {"fetch_min_bytes", "fetch_max_wait_ms"} <= set(kafka.KafkaConsumer.DEFAULT_CONFIG)
