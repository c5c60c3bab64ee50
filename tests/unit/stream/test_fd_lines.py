"""``DescriptorLines``: lines from a real pipe as ``BufferedReader.readline`` gives them, and a stop while waiting."""

from __future__ import annotations

import os
import threading

from ragmon.stream.fd_lines import CHUNK_BYTES, DescriptorLines


def pipe_with(data: bytes, *, close: bool = True) -> tuple[int, int]:
    read, write = os.pipe()
    os.write(write, data)
    if close:
        os.close(write)
    return read, write


def test_lines_come_whole_cut_at_the_limit_and_the_last_one_without_its_newline():
    fd, _ = pipe_with(b"one\ntwo\r\n" + b"x" * 10 + b"\nlast")
    lines = DescriptorLines(fd, threading.Event())
    assert [lines.readline(8) for _ in range(6)] == [b"one\n", b"two\r\n", b"x" * 8, b"xx\n", b"last", b""]
    assert lines.at_eof
    os.close(fd)


def test_a_line_longer_than_one_read_is_joined():
    line = b"y" * (CHUNK_BYTES * 2 + 5) + b"\n"
    fd, write = pipe_with(line[:CHUNK_BYTES], close=False)
    threading.Thread(target=lambda: (os.write(write, line[CHUNK_BYTES:]), os.close(write)), daemon=True).start()
    lines = DescriptorLines(fd, threading.Event())
    assert lines.readline(len(line) + 1) == line and lines.readline(10) == b""
    os.close(fd)


def test_closed_while_waiting_for_input_returns_nothing_and_is_not_the_end():
    fd, write = pipe_with(b"first\n", close=False)  # the writer stays open: no end of input
    closed = threading.Event()
    lines = DescriptorLines(fd, closed)
    assert lines.readline(100) == b"first\n"
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(lines.readline(100)))
    reader.start()
    closed.set()
    reader.join(30)
    assert not reader.is_alive() and got == [b""] and not lines.at_eof
    os.close(fd)
    os.close(write)
