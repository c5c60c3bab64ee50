"""One contract suite for ``TraceSource``, run against the in-memory double, real Kafka and JSON Lines files.

What the pipeline relies on: messages of a partition come in offset order with their bytes intact; nothing is
committed unless asked; a new member of the group starts at the committed offsets; a paused source returns
nothing; the revoke handler is called when partitions are taken away (here: on close). The file source is a
log of lines (followed as it grows); a "new member" is a new source started from the previous one's commits.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kafka import KafkaProducer

from ragmon.config import KafkaSettings
from ragmon.stream.file_source import FileTraceSource
from ragmon.stream.source import InMemoryTraceSource, KafkaTraceSource, RawMessage

T = "contract.traces"


class InMemoryBackend:
    def __init__(self) -> None:
        self.shared = InMemoryTraceSource()
        self.topic = T
        for partition in (0, 1):  # the two partitions of the Kafka backend's topic, assigned before any message
            self.shared.append(T, partition, [])

    def append(self, partition: int, values: list[bytes]) -> None:
        self.shared.append(self.topic, partition, values)

    def open(self) -> Any:
        self.shared.crash()  # a new member: forget positions, keep the commits
        self.shared.paused = False
        return self.shared


class KafkaBackend:
    def __init__(self, bootstrap: str, topic: str) -> None:
        self.bootstrap, self.topic = bootstrap, topic
        self.group = f"contract-{uuid.uuid4().hex[:8]}"
        self.producer = KafkaProducer(bootstrap_servers=bootstrap)

    def append(self, partition: int, values: list[bytes]) -> None:
        for v in values:
            self.producer.send(self.topic, v, partition=partition)
        self.producer.flush()

    def open(self) -> Any:
        return KafkaTraceSource(KafkaSettings(bootstrap_servers=self.bootstrap, topic=self.topic,
                                              group_id=self.group, session_timeout_ms=6000))


class FileBackend:
    def __init__(self, directory: Any) -> None:
        self.paths = [directory / "p0.jsonl", directory / "p1.jsonl"]
        for p in self.paths:
            p.touch()
        self.topic = T
        self.committed: dict[tuple[str, int], int] = {}
        self.last: FileTraceSource | None = None

    def append(self, partition: int, values: list[bytes]) -> None:
        with self.paths[partition].open("ab") as f:
            f.write(b"".join(v + b"\n" for v in values))

    def open(self) -> Any:
        if self.last is not None:
            self.committed = dict(self.last.committed)
        self.last = FileTraceSource(self.paths, topic=self.topic, max_line_bytes=1_048_576, follow=True,
                                    start=self.committed)
        return self.last


@pytest.fixture(params=["in_memory", pytest.param("kafka", marks=pytest.mark.kafka), "file"])
def backend(request: pytest.FixtureRequest) -> Iterator[Any]:
    if request.param == "in_memory":
        yield InMemoryBackend()
        return
    if request.param == "file":
        yield FileBackend(request.getfixturevalue("tmp_path"))
        return
    bootstrap = request.getfixturevalue("kafka_bootstrap")
    topic = request.getfixturevalue("new_topic")(2)
    b = KafkaBackend(bootstrap, topic)
    yield b
    b.producer.close()


def poll_until(source: Any, n: int, timeout: float = 30.0) -> list[RawMessage]:
    got: list[RawMessage] = []
    deadline = time.monotonic() + timeout
    while len(got) < n and time.monotonic() < deadline:
        got.extend(source.poll(0.2, 1000))
    return got


def by_partition(msgs: list[RawMessage]) -> dict[int, list[tuple[int, bytes]]]:
    out: dict[int, list[tuple[int, bytes]]] = {}
    for m in msgs:
        out.setdefault(m.partition, []).append((m.offset, m.value))
    return out


def test_messages_come_in_offset_order_with_their_bytes(backend):
    backend.append(0, [b"a0", b"a1", b"a2"])
    backend.append(1, [b"b0", b"\x00\xff binary"])
    source = backend.open()
    try:
        got = by_partition(poll_until(source, 5))
    finally:
        source.close()
    assert got == {0: [(0, b"a0"), (1, b"a1"), (2, b"a2")], 1: [(0, b"b0"), (1, b"\x00\xff binary")]}


def test_a_new_member_starts_at_the_committed_offsets_and_nothing_is_committed_unasked(backend):
    backend.append(0, [b"m0", b"m1", b"m2", b"m3"])
    first = backend.open()
    try:
        msgs = poll_until(first, 4)
        assert len(msgs) == 4
        first.commit({(backend.topic, 0): 2})
    finally:
        first.close()
    second = backend.open()
    try:
        again = poll_until(second, 2)
    finally:
        second.close()
    assert [(m.offset, m.value) for m in again] == [(2, b"m2"), (3, b"m3")]


def test_a_paused_source_returns_nothing_until_resumed(backend):
    source = backend.open()
    try:
        poll_until(source, 0)
        wait_assigned(source)
        source.pause()
        backend.append(0, [b"p0"])
        assert all(not source.poll(0.2, 1000) for _ in range(5))
        source.resume()
        assert [m.value for m in poll_until(source, 1)] == [b"p0"]
    finally:
        source.close()


def test_close_calls_the_revoke_handler_with_the_assigned_partitions(backend):
    calls: list[set[tuple[str, int]]] = []
    source = backend.open()
    handler: Callable[[set[tuple[str, int]]], dict] = lambda parts: calls.append(set(parts)) or {}  # noqa: E731
    source.set_revoke_handler(handler)
    backend.append(0, [b"r0"])
    poll_until(source, 1)
    if isinstance(source, InMemoryTraceSource):
        source.revoke({(backend.topic, 0), (backend.topic, 1)})
    source.close()
    assert calls and {(backend.topic, 0)} <= calls[0]


def wait_assigned(source: Any, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not source.assignment() and time.monotonic() < deadline:
        source.poll(0.2, 1000)
