"""Shared fixtures.

chDB allows one embedded engine (one data directory) per process, so the whole pytest session shares one
chDB directory and each test gets its own *database* in it: ``store`` below. Tests never open a second
chDB path in-process; tests that need their own directory run ragmon in a subprocess.
"""

from __future__ import annotations

import itertools
import os
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr

from ragmon.config import StoreSettings
from ragmon.store import ClickHouseStore
from tests.support.missing import missing

_counter = itertools.count()

#: markers of the tests that need a service or a tool built for them (pyproject.toml registers every marker)
SERVICE_MARKERS = ("kafka", "prometheus", "collector", "browser", "system")
#: folders of tests that drive real components end to end
END_TO_END_DIRS = ("integration", "system")
#: fixtures that reach the Kafka broker
KAFKA_FIXTURES = {"kafka_bootstrap", "new_topic"}


@pytest.hookimpl(tryfirst=True)  # before -m deselects, so that `-m "not slow"` sees these markers
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The fast tier (``pytest -m "not slow"``, ``scripts/test --fast``) is tests/unit and tests/contract less the
    long simulations marked ``slow`` by hand. A test that takes a Kafka fixture is marked ``kafka``; every test
    under tests/integration or tests/system, and every test marked with a service, is marked ``slow`` too."""
    root = Path(__file__).parent
    for item in items:
        if KAFKA_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.kafka)
        path = Path(item.path)
        folder = path.relative_to(root).parts[0] if path.is_relative_to(root) else ""
        if folder in END_TO_END_DIRS or any(item.get_closest_marker(m) for m in SERVICE_MARKERS):
            item.add_marker(pytest.mark.slow)


@pytest.fixture(scope="session")
def chdb_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("chdb")


@pytest.fixture
def store_settings(chdb_dir: Path) -> StoreSettings:
    """Settings for a fresh database inside the session's chDB directory."""
    return StoreSettings(dsn=SecretStr(f"chdb://{chdb_dir}"), database=f"t{os.getpid()}_{next(_counter)}")


@pytest.fixture
def store(store_settings: StoreSettings) -> Iterator[ClickHouseStore]:
    """A migrated, empty store; dropped after the test."""
    s = ClickHouseStore.open(store_settings)
    yield s
    s.command(f"DROP DATABASE IF EXISTS {store_settings.database}")


def make_trace(**overrides: Any) -> dict[str, Any]:
    """A valid trace.v1 document (plain data); keyword arguments replace top-level fields."""
    trace: dict[str, Any] = {
        "trace_id": f"t-{uuid.uuid4().hex[:12]}",
        "query_id": f"q-{uuid.uuid4().hex[:12]}",
        "timestamp": datetime.now(UTC).isoformat(),
        "retriever": {"name": "hybrid", "version": "v1", "variant": "production", "parameters": {"k": 3}},
        "corpus_snapshot": "2026-11-01",
        "index_version": "idx-7",
        "question": "Can a customer withdraw consent for marketing messages?",
        "category": "consent",
        "retrieved": [
            {"chunk_id": "policy@c41", "doc_id": "policy", "doc_version": "2026-03-11", "score": 0.82, "rank": 1,
             "text": "Consent can be withdrawn at any time. Withdrawal applies to future messages."},
            {"chunk_id": "policy@c42", "doc_id": "policy", "doc_version": "2026-03-11", "score": 0.61, "rank": 2,
             "text": "Marketing messages require opt-in consent."},
            {"chunk_id": "faq@c7", "doc_id": "faq", "doc_version": "2026-01-02", "score": 0.40, "rank": 3,
             "text": "Our offices are open on weekdays."},
        ],
        "context": {"chunk_ids": ["policy@c41", "policy@c42"], "tokens": 64},
        "answer": "Yes. Consent can be withdrawn at any time. It applies to future messages.",
        "behaviour": "answer",
        "citations": [{"sentence": 1, "chunk_id": "policy@c41", "quote": "Consent can be withdrawn at any time"}],
        "model": {"name": "gen-model", "version": "2026-10"},
        "prompt": {"id": "answer-with-citations", "version": "3"},
        "latency_ms": {"retrieve": 41.0, "generate": 620.0},
        "tokens": {"prompt": 410, "completion": 35},
        "cost_usd": 0.0012,
    }
    trace.update(overrides)
    return trace


# --- Kafka (the real broker from scripts/kafka-broker) ------------------------------------------------------

_KAFKA_HINT = "start one with: scripts/kafka-broker start (or point RAGMON_TEST_KAFKA at a broker)"


@pytest.fixture(scope="session")
def kafka_bootstrap() -> str:
    """Bootstrap address of a reachable Kafka broker (RAGMON_TEST_KAFKA, default 127.0.0.1:9092).

    No broker: the test fails when CI=true (CI must never silently skip Kafka tests) and is skipped otherwise.
    """
    from kafka import KafkaAdminClient
    from kafka.errors import KafkaError

    address = os.environ.get("RAGMON_TEST_KAFKA", "127.0.0.1:9092")
    try:
        admin = KafkaAdminClient(bootstrap_servers=address, client_id="ragmon-tests-probe",
                                 request_timeout_ms=5000, bootstrap_timeout_ms=5000)
        try:
            brokers = admin.describe_cluster()["brokers"]
        finally:
            admin.close()
        if not brokers:
            raise KafkaError("the cluster reports no brokers")
    except (KafkaError, OSError, ValueError) as exc:
        message = f"no Kafka broker reachable at {address} ({exc!r}); {_KAFKA_HINT}"
        missing(message)
    return address


@pytest.fixture
def new_topic(kafka_bootstrap: str, request: pytest.FixtureRequest) -> Iterator[Any]:
    """Factory ``new_topic(partitions=3) -> name``: a uniquely named topic, ready (leaders elected), deleted after."""
    from kafka import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=kafka_bootstrap, client_id="ragmon-tests-admin",
                             request_timeout_ms=15000)
    created: list[str] = []
    base = "".join(c if c.isalnum() or c in "._-" else "-" for c in request.node.name)[:60]

    def make(partitions: int = 3, *, configs: dict[str, str] | None = None) -> str:
        name = f"ragmon-test-{base}-{uuid.uuid4().hex[:8]}"
        spec: dict[str, Any] = {"num_partitions": partitions, "replication_factor": 1}
        if configs:
            spec["configs"] = configs
        admin.create_topics({name: spec}, timeout_ms=15000, wait_for_metadata=True)
        created.append(name)
        return name

    try:
        yield make
    finally:
        if created:
            admin.delete_topics(created, timeout_ms=15000, raise_errors=False)
        admin.close()
