"""The OTLP/HTTP receiver's parts without a server: its settings (the token from a file), its queue
(``HttpTraceSource``: bounded, refusing while paused or closed, every request spooled first), its own port (a port
in use names ``otlp``), and what the queue holds when the loop stops, read again from the spool by the next one."""

from __future__ import annotations

import socket
import threading
from pathlib import Path

import pytest

from ragmon.config import load_settings
from ragmon.errors import ConfigError
from ragmon.otlp.http_source import HttpTraceSource
from ragmon.otlp.http_spool import HttpSpool
from ragmon.pipeline.spans.otlp import parse_otlp
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


def source_in(directory: Path, max_queued_bytes: int = 10_000_000,
              max_spool_bytes: int = 10_000_000) -> HttpTraceSource:
    return HttpTraceSource(max_queued_bytes, HttpSpool(directory, max_bytes=max_spool_bytes))


def test_the_queue_is_bounded_and_refuses_while_paused_or_closed(tmp_path: Path):
    source = source_in(tmp_path, max_queued_bytes=1_000)
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


def test_nothing_is_handed_out_while_paused(tmp_path: Path):
    # the loop pauses its source while a write fails and ignores what a poll returns meanwhile (a paused Kafka
    # consumer returns nothing): a request queued just before the pause must wait, not be handed out and lost
    source = source_in(tmp_path)
    assert source.offer(b"x", ["span"]) == ""
    source.pause()
    assert source.poll(0.01, 10) == [] and source.lag() == {("otlp-http", 0): 1}
    source.resume()
    assert [m.offset for m in source.poll(0, 10)] == [0]


def test_a_full_spool_refuses_and_takes_requests_again_once_committed(tmp_path: Path):
    source = source_in(tmp_path, max_spool_bytes=1_048_576)
    body = b"x" * 600_000
    assert source.offer(body, ["span"]) == "" and source.offer(body, ["span"]) == "spool_full"
    assert [m.offset for m in source.poll(0, 10)] == [0]
    source.commit({("otlp-http", 0): 1})  # stored: the spool forgets it
    assert source.spool.size_bytes() == 0 and source.offer(body, ["span"]) == ""


def test_poll_wakes_up_when_a_request_arrives(tmp_path: Path):
    source = source_in(tmp_path, max_queued_bytes=1_000)
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


def test_what_is_not_stored_at_shutdown_is_read_again_by_the_next_loop(rig, tmp_path: Path):
    spans = rag_spans(2, prefix="late")
    complete, root_only = otlp_messages(spans[:3], 10, "proto")[0], otlp_messages(spans[5:], 10, "proto")[0]
    source = source_in(tmp_path)
    r = rig(source=source, max_batch_rows=100)  # the rig's pipeline over the receiver's queue
    source.offer(complete, parse_otlp(complete, "otlp_proto", max_bytes=10_000_000))
    r.drive(5)
    source.offer(root_only, parse_otlp(root_only, "otlp_proto", max_bytes=10_000_000))  # its children never come
    r.drive(1)
    assert [row["query_id"] for row in r.writer.rows] == ["late0"] and r.pipeline.intake.pending() == 1
    r.pipeline.shutdown()
    assert source.offer(complete, []) == "closed"
    assert source.committed == {("otlp-http", 0): 1}, "the trace still assembling holds its request"

    again = source_in(tmp_path)  # the next start: the spool replays what is after the committed position
    assert again.lag() == {("otlp-http", 0): 1}
    r2 = rig(source=again, writer=r.writer, max_batch_rows=100)
    r2.drive(20)  # its settle wait: stored marked incomplete, as a root alone is
    assert [row["query_id"] for row in r.writer.rows] == ["late0", "late1"]
    assert again.committed == {("otlp-http", 0): 2} and again.spool.size_bytes() == 0


def test_spans_the_receiver_parsed_are_assembled_whatever_the_body_looks_like(rig, tmp_path: Path):
    # OTLP/JSON may put another key before resourceSpans: neither the intake nor the spool's replay may sniff a
    # parsed request's bytes
    body = otlp_messages(rag_spans(1, prefix="json"), 10, "otlp_json")[0]
    body = b'{"schemaUrl": "", ' + body[1:]
    live = source_in(tmp_path / "live")
    r = rig(source=live, max_batch_rows=100)
    live.offer(body, parse_otlp(body, "otlp_json", max_bytes=10_000_000), fmt="otlp_json")
    r.drive(10)
    assert [row["query_id"] for row in r.writer.rows] == ["json0"] and r.dlq.letters == []
    spooled = source_in(tmp_path / "spooled")
    spooled.offer(body, parse_otlp(body, "otlp_json", max_bytes=10_000_000), fmt="otlp_json")
    spooled.close()  # stopped before its loop took the request: the next start reads it from the spool
    r2 = rig(source=source_in(tmp_path / "spooled"), max_batch_rows=100)
    r2.drive(10)
    assert [row["query_id"] for row in r2.writer.rows] == ["json0"] and r2.dlq.letters == []


def test_ragmon_run_with_the_otlp_port_taken_says_which_setting_and_switch(tmp_path: Path):
    from ragmon.config import Settings
    from ragmon.process import build_process

    class Store:
        def readiness(self) -> tuple[bool, str]:
            return True, "ok"

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        settings = Settings(server={"port": 0},
                            otlp={"port": busy.getsockname()[1], "spool_dir": str(tmp_path / "spool"),
                                                      "dead_letters": str(tmp_path / "dead.jsonl")})
        process = build_process(settings, ["otlp"], store=Store())
        with pytest.raises(ConfigError) as info:
            process.serve()
    [line] = info.value.problems
    assert (line.startswith("otlp: cannot listen")
            and line.endswith("(or switch the role off: RAGMON_ROLES__OTLP=false)"))
    assert process.server is None, "the shared port is released again"
