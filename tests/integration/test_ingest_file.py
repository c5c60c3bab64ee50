"""``ragmon ingest --file``: JSON Lines from a file or standard input into the real chDB store, no broker.

Runs the console command as a subprocess with its own chDB directory (as a user would) and counts with FINAL
from a fresh process.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.integration.ingest_support import ROOT, count_in_subprocess, exactly_once_problems
from tests.support.producers import realistic_stream


def ingest_file(chdb: Path, *args: str, stdin: bytes | None = None, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", "from ragmon.cli.app import main; main()", "ingest", *args],
                          input=stdin, capture_output=True, timeout=300, cwd=ROOT,
                          env=dict(os.environ, RAGMON_STORE__DSN=f"chdb://{chdb}", PYTHONPATH=str(ROOT), **env))


def summary(proc: subprocess.CompletedProcess) -> dict[str, Any]:
    [line] = [x for x in proc.stderr.decode().splitlines() if x.startswith("ragmon ingest --file: ")]
    return json.loads(line.split(": ", 1)[1])


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
    assert exactly_once_problems(count_in_subprocess(chdb), stream.valid_ids) == []
    letters = [json.loads(x) for x in dead.read_bytes().splitlines()]
    first_run = letters[:len(expected)]
    assert sorted(d["reason"] for d in first_run) == expected
    assert letters == first_run * 2, "the second run dead-letters the same lines again, appended"
    too_long = next(d for d in first_run if d["reason"] == "too_large")
    assert too_long["line"] == len(lines) and too_long["source"]["topic"] == f"file:{path}"
    assert hashlib.sha256(long_line).hexdigest() in too_long["detail"] and too_long["value"] == long_line[:1024].decode()
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
