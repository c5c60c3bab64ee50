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

_counter = itertools.count()


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
