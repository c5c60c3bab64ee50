"""The OTLP/HTTP receiver's parts without a server: its settings (the token from a file), its queue
(``HttpTraceSource``: bounded, refusing while paused or closed), its own port (a port in use names ``otlp``), and
the ingest loop storing what the queue holds when it stops."""

from __future__ import annotations

import socket
import threading
from pathlib import Path

import pytest

from ragmon.config import load_settings
from ragmon.errors import ConfigError
from ragmon.ingest.http_source import HttpTraceSource
from ragmon.ingest.otlp import parse_otlp
from ragmon.server import create_listener_app, serve
from tests.support.otel_spans import otlp_messages, rag_spans


def test_the_token_is_read_from_its_file_and_masked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    (tmp_path / "token").write_text("tok-from-file\n")
    monkeypatch.setenv("RAGMON_OTLP__TOKEN_FILE", str(tmp_path / "token"))
    settings = load_settings()
    assert settings.otlp.token is not None and settings.otlp.token.get_secret_value() == "tok-from-file"
    assert "tok-from-file" not in repr(settings.otlp)
    monkeypatch.setenv("RAGMON_OTLP__TOKEN_FILE", str(tmp_path / "missing"))
    with pytest.raises(ConfigError, match="otlp.token_file: cannot read"):
        load_settings()


def test_the_queue_is_bounded_and_refuses_while_paused_or_closed():
    source = HttpTraceSource(max_queued_bytes=1_000)
    assert source.offer(b"x" * 1_500, []) == "", "one request larger than the bound still passes an empty queue"
    assert source.offer(b"y" * 10, []) == "busy"
    [msg] = source.poll(0, 10)
    assert (msg.topic, msg.partition, msg.offset, len(msg.value)) == ("otlp-http", 0, 0, 1_500)
    assert source.queued_bytes() == 0 and source.offer(b"y" * 10, ["span"]) == ""
    source.pause()
    assert source.offer(b"z", []) == "busy"
    source.resume()
    source.close()
    assert source.offer(b"z", []) == "closed"
    [left] = source.poll(0, 10)  # what was accepted before the close is still handed out
    assert left.offset == 1 and left.spans == ["span"] and source.poll(0, 10) == []


def test_poll_wakes_up_when_a_request_arrives():
    source = HttpTraceSource(max_queued_bytes=1_000)
    got: list[object] = []
    poller = threading.Thread(target=lambda: got.extend(source.poll(30, 10)))
    poller.start()
    source.offer(b"x", [])
    poller.join(10)
    assert not poller.is_alive() and len(got) == 1


def test_the_receivers_port_in_use_names_its_own_settings():
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with pytest.raises(ConfigError) as info:
            serve(create_listener_app([]), "127.0.0.1", port, section="otlp")
    [line] = info.value.problems
    assert line.startswith("otlp: cannot listen on") and "RAGMON_OTLP__PORT" in line


def test_what_the_queue_holds_at_shutdown_is_stored(rig):
    source = HttpTraceSource(max_queued_bytes=10_000_000)
    r = rig(source=source, max_batch_rows=100)  # the rig's pipeline over the receiver's queue
    spans = rag_spans(2, prefix="late")
    body = otlp_messages(spans, 10, "proto")[0]
    source.offer(body, parse_otlp(body, "otlp_proto", max_bytes=10_000_000))
    stop = threading.Event()
    stop.set()
    r.pipeline.run(stop)  # stopped before its first poll
    assert sorted(row["query_id"] for row in r.writer.rows) == ["late0", "late1"]
    assert source.offer(body, []) == "closed"


def test_spans_the_receiver_parsed_are_assembled_whatever_the_body_looks_like(rig):
    # OTLP/JSON may put another key before resourceSpans: the intake must not sniff a parsed request's bytes
    source = HttpTraceSource(max_queued_bytes=10_000_000)
    r = rig(source=source, max_batch_rows=100)
    body = otlp_messages(rag_spans(1, prefix="json"), 10, "proto")[0]
    source.offer(b'{"schemaUrl": "", "resourceSpans": []}', parse_otlp(body, "otlp_proto", max_bytes=10_000_000))
    r.drive(10)
    assert [row["query_id"] for row in r.writer.rows] == ["json0"] and r.dlq.letters == []


def test_ragmon_run_with_the_otlp_port_taken_says_which_setting_and_switch(tmp_path: Path):
    from ragmon.config import Settings
    from ragmon.process import build_process

    class Store:
        def readiness(self) -> tuple[bool, str]:
            return True, "ok"

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        settings = Settings(server={"port": 0}, otlp={"port": busy.getsockname()[1],
                                                      "dead_letters": str(tmp_path / "dead.jsonl")})
        process = build_process(settings, ["otlp"], store=Store())
        with pytest.raises(ConfigError) as info:
            process.serve()
    [line] = info.value.problems
    assert line.startswith("otlp: cannot listen") and line.endswith("(or switch the role off: RAGMON_ROLES__OTLP=false)")
    assert process.server is None, "the shared port is released again"
