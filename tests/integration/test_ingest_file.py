"""``ragmon ingest --file``: JSON Lines from a file or standard input into the real chDB store, no broker.

Runs the console command as a subprocess with its own chDB directory (as a user would) and counts with FINAL
from a fresh process. Writes fail for real: dead letters to ``/dev/full``, the store on a size-limited tmpfs
filled up (mounting one needs root; the test says so and skips otherwise), and standard input stays an open pipe
while the command is stopped.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration.ingest_support import ROOT, count_in_subprocess, exactly_once_problems
from tests.support.cli_process import CliProcess
from tests.support.producers import Stream, realistic_stream


def ingest_file(chdb: Path, *args: str, stdin: bytes | None = None, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", "from ragmon.cli.app import main; main()", "ingest", *args],
                          input=stdin, capture_output=True, timeout=300, cwd=ROOT,
                          env=dict(os.environ, RAGMON_STORE__DSN=f"chdb://{chdb}", PYTHONPATH=str(ROOT), **env))


def summary(proc: subprocess.CompletedProcess) -> dict[str, Any]:
    return summary_of(proc.stderr.decode())


def summary_of(stderr: str) -> dict[str, Any]:
    [line] = [x for x in stderr.splitlines() if x.startswith("ragmon ingest --file: ")]
    return json.loads(line.split(": ", 1)[1])


def file_lines(stream: Stream) -> tuple[list[bytes], list[int]]:
    """The stream as lines of a file, and the (1-based) numbers of its invalid lines (an empty message would be a
    blank line: left out)."""
    messages = [m for m in stream.messages if m[1]]
    return [v for _, v, _ in messages], [i + 1 for i, (k, _, _) in enumerate(messages) if k.startswith(b"bad-")]


def started(chdb: Path, *args: str, stdin: int | None = None) -> CliProcess:
    """``ragmon ingest ARGS…`` running on the chDB store at ``chdb``."""
    return CliProcess(["ingest", *args], {"RAGMON_STORE__DSN": f"chdb://{chdb}"}, stdin=stdin)


def test_a_file_loaded_twice_stores_each_trace_once_and_dead_letters_its_bad_lines(tmp_path):
    stream = realistic_stream(400, seed=11, malformed_every=40)
    long_line = b'{"question": "' + b"x" * 60_000 + b'"}'
    lines = [v for _, v, _ in stream.messages if v] + [long_line]  # (an empty message cannot be a line)
    bad = [m for m in stream.messages if m[0].startswith(b"bad-")]
    # an empty message would be a blank line in a file: skipped and counted, not dead-lettered
    expected = sorted([r for (_, v, _), r in zip(bad, stream.reasons, strict=True) if v] + ["too_large"])
    path = tmp_path / "traces.jsonl"
    # a byte-order mark as some editors write one, CRLF line ends, blank lines
    path.write_bytes(b"\xef\xbb\xbf" + b"\r\n".join(lines) + b"\r\n\r\n  \n")
    dead = tmp_path / "dead.jsonl"
    chdb = tmp_path / "chdb"
    runs = [ingest_file(chdb, "--file", str(path), "--dead-letter-file", str(dead),
                        RAGMON_INGEST__MAX_MESSAGE_BYTES="50000") for _ in range(2)]
    for run in runs:
        assert run.returncode == 0, run.stderr.decode()[-3000:]
    first = summary(runs[0])
    assert first["complete"] and first["stored"] == len(stream.valid_ids) and first["blank_lines"] == 2
    assert first["resume_from_line"] is None and first["not_stored"] == 0 and first["dead_letters_not_written"] == {}
    assert exactly_once_problems(count_in_subprocess(chdb), stream.valid_ids) == []
    letters = [json.loads(x) for x in dead.read_bytes().splitlines()]
    first_run = letters[:len(expected)]
    assert sorted(d["reason"] for d in first_run) == expected
    assert letters == first_run * 2, "the second run dead-letters the same lines again, appended"
    too_long = next(d for d in first_run if d["reason"] == "too_large")
    assert too_long["line"] == len(lines) and too_long["source"]["topic"] == f"file:{path}"
    assert (hashlib.sha256(long_line).hexdigest() in too_long["detail"]
            and too_long["value"] == long_line[:1024].decode())
    assert first["dead_letters"] == {r: sum(d["reason"] == r for d in first_run) for r in first["dead_letters"]}


def test_standard_input_in_dead_letters_to_standard_output_and_a_missing_file_is_a_usage_error(tmp_path):
    stream = realistic_stream(50, seed=12)
    lines = [v for _, v, _ in stream.messages] + [b"{not json"]
    run = ingest_file(tmp_path / "chdb", "--file", "-", stdin=b"\n".join(lines) + b"\n")
    assert run.returncode == 0, run.stderr.decode()[-3000:]
    [letter] = [json.loads(x) for x in run.stdout.splitlines()]
    assert letter["reason"] == "invalid_json" and letter["value"] == "{not json" and letter["line"] == 51
    assert letter["source"]["topic"] == "file:-"
    assert exactly_once_problems(count_in_subprocess(tmp_path / "chdb"), stream.valid_ids) == []
    missing = ingest_file(tmp_path / "chdb", "--file", str(tmp_path / "nope.jsonl"))
    assert missing.returncode == 2 and b"nope.jsonl" in missing.stderr and b"Traceback" not in missing.stderr
    alone = ingest_file(tmp_path / "chdb", "--dead-letter-file", str(tmp_path / "d.jsonl"))
    assert alone.returncode == 2 and b"--dead-letter-file needs --file" in alone.stderr


def test_a_file_without_one_trace_exits_2_and_says_what_it_may_be(tmp_path):
    """Every line dead-lettered is not a backfill that went well: the wrong file (outcome events) or format."""
    outcomes = sorted((ROOT / "schemas" / "examples" / "outcome" / "valid").glob("*.json"))
    assert outcomes, "the schema's valid outcome examples"
    lines = [json.dumps(json.loads(p.read_text())).encode() for p in outcomes] + [b"{not json"]
    dead = tmp_path / "dead.jsonl"
    run = ingest_file(tmp_path / "chdb", "--file", "-", "--dead-letter-file", str(dead), "--input-format", "native",
                      stdin=b"\n".join(lines) + b"\n")
    err = run.stderr.decode()
    assert run.returncode == 2, err[-3000:]
    assert f"none of the {len(lines)} lines of - is a trace" in err and "--outcomes" in err and "otlp_json" in err
    assert summary(run)["complete"] and summary(run)["stored"] == 0, "the summary is printed first, as ever"
    assert len(dead.read_bytes().splitlines()) == len(lines), "every line's dead letter written"
    one_good = ingest_file(tmp_path / "chdb2", "--file", "-", stdin=b"\n".join(
        [lines[-1], *(v for _, v, _ in realistic_stream(1, seed=13).messages if v)]) + b"\n")
    assert one_good.returncode == 0, one_good.stderr.decode()[-3000:]


@pytest.mark.parametrize("batch_rows", [None, 5], ids=["one-batch", "batches-of-5"])
def test_stopped_while_its_dead_letters_cannot_be_written_it_exits_3_incomplete_and_resumes_exactly_once(
        tmp_path, batch_rows):
    stream = realistic_stream(40, seed=13, malformed_every=15)
    lines, bad = file_lines(stream)  # invalid lines 9, 25 and 41: the batches of five before line 9 hold none
    path = tmp_path / "traces.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    chdb = tmp_path / "chdb"
    batching = ["--max-batch-rows", str(batch_rows)] if batch_rows else []  # None: the whole file in one batch
    run = started(chdb, "--file", str(path), "--dead-letter-file", "/dev/full", *batching)
    try:
        run.wait_for("dead_letter write failed")  # really failing: ENOSPC from /dev/full
        rc = run.stop(signal.SIGTERM)
    finally:
        run.kill()
    assert rc == 3, run.stderr[-3000:]
    s = summary_of(run.stderr)
    assert s["complete"] is False and s["dead_letters"] == {}, s  # not one letter was written: none is counted
    resume = s["resume_from_line"]
    if batch_rows:
        assert 1 < resume <= bad[0], s  # the batches before the first invalid line were stored and committed
    else:
        assert resume == 1 and s["stored"] == len(stream.valid_ids), s  # stored, but its dead letters are not
    assert s["dead_letters_not_written"] and set(s["dead_letters_not_written"]) <= set(stream.reasons), s
    error = run.stderr.splitlines()[-1]
    assert error.startswith("error: ") and "/dev/full" in error, error
    assert (f"--from-line {resume}" if resume > 1 else "run the same command again") in error, error

    dead = tmp_path / "dead.jsonl"
    again = ingest_file(chdb, "--file", str(path), "--dead-letter-file", str(dead), "--from-line", str(resume))
    assert again.returncode == 0, again.stderr.decode()[-3000:]
    assert summary(again)["complete"] is True
    assert exactly_once_problems(count_in_subprocess(chdb), stream.valid_ids) == []
    letters = [json.loads(x) for x in dead.read_bytes().splitlines()]
    assert sorted(d["line"] for d in letters) == bad  # every invalid line dead-lettered once, with its reason
    assert Counter(d["reason"] for d in letters) == Counter(stream.reasons)


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 16 MiB tmpfs: the store on it fills up for real (ClickHouse cannot reserve space for an insert)."""
    where = tmp_path / "disk"
    where.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(where)], capture_output=True,
                             text=True)
    if mounted.returncode != 0:
        pytest.skip(f"a full disk needs a size-limited tmpfs, and mounting one needs root: {mounted.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def fill(disk: Path) -> Path:
    """Take every free byte of ``disk`` (dd stops at ENOSPC); delete the file it returns to free them."""
    filler = disk / "filler"
    subprocess.run(["dd", "if=/dev/zero", f"of={filler}", "bs=64k"], capture_output=True, check=False)
    assert os.statvfs(disk).f_bavail == 0
    return filler


def test_stopped_while_the_store_is_on_a_full_disk_it_exits_3_incomplete_and_a_rerun_stores_each_trace_once(
        tmp_path, small_disk):
    stream = realistic_stream(20, seed=3, malformed_every=3)
    lines, bad = file_lines(stream)
    path = tmp_path / "traces.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    chdb = small_disk / "chdb"
    env = dict(os.environ, RAGMON_STORE__DSN=f"chdb://{chdb}", PYTHONPATH=str(ROOT))
    migrated = subprocess.run([sys.executable, "-m", "ragmon", "store", "migrate"], env=env, cwd=ROOT,
                              capture_output=True, text=True, timeout=120)
    assert migrated.returncode == 0, migrated.stderr
    filler = fill(small_disk)
    dead = tmp_path / "dead.jsonl"
    run = started(chdb, "--file", str(path), "--dead-letter-file", str(dead))
    try:
        run.wait_for("store write failed")  # really failing: NOT_ENOUGH_SPACE
        rc = run.stop(signal.SIGTERM)
    finally:
        run.kill()
    assert rc == 3, run.stderr[-3000:]
    s = summary_of(run.stderr)
    assert s["complete"] is False and s["stored"] == 0 and s["dead_letters"] == {} and s["resume_from_line"] == 1, s
    # every line read is accounted for: nothing was stored or dead-lettered, so each is named as not done
    assert s["not_stored"] + sum(s["dead_letters_not_written"].values()) == s["lines"] > 0, s
    assert dead.read_bytes() == b""
    error = run.stderr.splitlines()[-1]
    assert error.startswith("error: ") and "NOT_ENOUGH_SPACE" in error and "again" in error, error

    filler.unlink()  # the disk has room again: the same command, twice
    for _ in range(2):
        again = ingest_file(chdb, "--file", str(path), "--dead-letter-file", str(dead))
        assert again.returncode == 0, again.stderr.decode()[-3000:]
        assert summary(again)["complete"] is True
        assert exactly_once_problems(count_in_subprocess(chdb), stream.valid_ids) == []
    letters = [json.loads(x) for x in dead.read_bytes().splitlines()]
    assert sorted(d["line"] for d in letters) == sorted(bad * 2)  # each run dead-letters the invalid lines once


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_standard_input_still_open_exits_promptly_on_a_signal_and_resumes_exactly_once(tmp_path, sig):
    stream = realistic_stream(30, seed=14, malformed_every=10)
    lines, bad = file_lines(stream)
    data = b"\n".join(lines) + b"\n"
    chdb, dead = tmp_path / "chdb", tmp_path / "dead.jsonl"
    run = started(chdb, "--file", "-", "--dead-letter-file", str(dead), stdin=subprocess.PIPE)
    try:
        run.wait_for("ragmon ingest: reading -")  # its start-up line: the signal handlers are in place
        assert run.proc.stdin is not None
        run.proc.stdin.write(data)
        run.proc.stdin.flush()  # and standard input stays open
        rc = run.stop(sig)
    finally:
        run.kill()
    assert "Fatal Python error" not in run.stderr, run.stderr[-3000:]
    assert rc == 6, run.stderr[-3000:]
    s = summary_of(run.stderr)
    assert s["complete"] is False and s["not_stored"] == 0 and s["dead_letters_not_written"] == {}, s
    resume = s["resume_from_line"]
    error = run.stderr.splitlines()[-1]
    assert f"by {signal.Signals(sig).name}" in error, error
    assert (f"--from-line {resume}" if resume > 1 else "run the same command again") in error, error

    again = ingest_file(chdb, "--file", "-", "--dead-letter-file", str(dead), "--from-line", str(resume), stdin=data)
    assert again.returncode == 0, again.stderr.decode()[-3000:]
    assert summary(again)["complete"] is True
    assert exactly_once_problems(count_in_subprocess(chdb), stream.valid_ids) == []
    assert sorted(json.loads(x)["line"] for x in dead.read_bytes().splitlines()) == bad
