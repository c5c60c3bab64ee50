"""A full disk under the embedded engine while it writes a part: nothing acknowledged is lost (issue 30).

The engine (chDB) ignores failed file writes, so a merge or an insert that runs into ENOSPC commits a part of empty or
short files and reports success (docs/operations.md, "The disk"). Each test runs the store in a process of its own
(``tests/support/store_disk_full.py``: chDB allows one engine per process) on a tmpfs of its own, fills that tmpfs
with a ballast file for a fifth of a second as soon as the part's directory appears, then reads every row and column,
and opens the store again (a restart) and reads again. Without the write guard: the reads fail (CANNOT_READ_ALL_DATA,
"Empty marks file", "Checksum doesn't match") and the restart detaches the part as ``broken-on-start``, its rows gone.
Two more keep the disk full longer than the table keeps the parts a merge replaced (``old_parts_lifetime``, 3 s here),
with the process running on or ending meanwhile: without the guard's copies of the replaced parts, all 24,000 rows
are gone.

Needs root to mount the tmpfs: skipped otherwise, failed under CI=true (CI runs as root). The last test cuts a small
file of a part by hand instead (no tmpfs, no root).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.missing import missing

ROOT = Path(__file__).resolve().parents[2]
SCENARIO = ROOT / "tests" / "support" / "store_disk_full.py"


@pytest.fixture
def tmpfs(tmp_path: Path) -> Iterator[Path]:
    """A 256 MiB tmpfs of the test's own."""
    where = tmp_path / "disk"
    where.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256m", "tmpfs", str(where)], capture_output=True,
                             text=True)
    if mounted.returncode != 0:
        missing(f"a disk that fills for real needs a size-limited tmpfs, and mounting one needs root "
                f"(uid {os.geteuid()}): {mounted.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def shown(out: dict) -> str:
    """The scenario's whole report (pytest shortens a dict in an assertion's message)."""
    return json.dumps(out)


def run(scenario: str, mount: Path) -> dict:
    done = subprocess.run([sys.executable, str(SCENARIO), *scenario.split(), str(mount)], capture_output=True,
                          text=True, timeout=300, env=dict(os.environ, PYTHONPATH=str(ROOT)), cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_merge_that_runs_into_a_full_disk_loses_nothing(tmpfs):
    out = run("merge", tmpfs)
    assert out["ignored_writes"] > 0, shown(out)  # the fault happened: the engine ignored failed writes of the merge
    assert out["read_error"] is None, shown(out)  # the incomplete part is gone from the table ...
    assert out["rows"] == out["unique"] == out["acked"] == 24_000, shown(out)  # ... and what it replaced is back
    assert [d[2] for d in out["broken_detached"]] == ["broken"], shown(out)  # kept aside, named as broken
    again = run("count", tmpfs)  # a restart
    assert again["read_error"] is None and again["rows"] == again["unique"] == 24_000, shown(again)
    assert not any(d[2] == "broken-on-start" for d in again["broken_detached"]), shown(again)


def test_an_insert_that_runs_into_a_full_disk_is_acknowledged_only_once_whole(tmpfs):
    out = run("insert", tmpfs)
    assert out["ignored_writes"] > 0, shown(out)  # the fault happened while the insert's part was written
    # the insert was written again (by the guard, or by the caller after a retryable error), never acknowledged
    # with its part incomplete: every row readable, once
    assert out["read_error"] is None and out["rows"] == out["unique"] == out["acked"] == 60_000, shown(out)
    again = run("count", tmpfs)
    assert again["read_error"] is None and again["rows"] == again["unique"] == 60_000, shown(again)
    assert not any(d[2] == "broken-on-start" for d in again["broken_detached"]), shown(again)


def test_a_merge_broken_while_the_disk_stays_full_longer_than_replaced_parts_are_kept_loses_nothing(tmpfs):
    # the incomplete part cannot be detached while the disk is full, and the engine removes the parts it replaced
    # after old_parts_lifetime (3 s here, 12 s full): the guard's hard-linked copies of them are what is left
    out = run("merge-held", tmpfs)
    assert out["ignored_writes"] > 0, shown(out)
    assert out["read_error"] is None and out["rows"] == out["unique"] == out["acked"] == 24_000, shown(out)
    again = run("count", tmpfs)
    assert again["read_error"] is None and again["rows"] == again["unique"] == 24_000, shown(again)


def test_a_process_that_ends_before_it_could_detach_the_broken_merge_loses_nothing(tmpfs):
    # the same, and the process ends with the disk still full (the part still active, the replaced parts removed
    # by the engine): at the next start the engine detaches the part as broken-on-start, and the copies come back
    for _ in range(3):
        out = run("merge-killed", tmpfs)
        (tmpfs / "ballast").unlink()  # the disk has room again
        if out["read_error"] is not None:
            break
        # the guard found the 1 MiB a detach reserves after all and repaired the part before the process ended (1 run
        # in 11, measured with the scenario as it is): nothing lost, but not this test's case; again, on a new store
        assert out["rows"] == out["unique"] == out["acked"] == 24_000, shown(out)
        shutil.rmtree(tmpfs / "chdb")
    assert out["ignored_writes"] > 0 and out["read_error"] is not None, shown(out)  # the part was still there, broken
    again = run("count", tmpfs)
    assert again["read_error"] is None and again["rows"] == again["unique"] == 24_000, shown(again)
    assert [d[2] for d in again["broken_detached"]] == ["broken-on-start"], shown(again)


@pytest.mark.parametrize("name", ["default_compression_codec.txt", "metadata_version.txt", "columns_substreams.txt"])
def test_an_insert_whose_part_has_a_file_cut_that_check_table_does_not_read_is_written_again(tmp_path, name):
    # CHECK TABLE passes such a part and reads work, but the next start detaches it as broken-on-start, every row of
    # it gone (seen once in CI: the disk filled as the engine wrote one of these files last). Without the guard's
    # look at these files: acknowledged, then 0 rows after the restart
    out = run(f"cut {name}", tmp_path)
    assert out["cut"] and out["read_error"] is None, shown(out)
    assert out["rows"] == out["unique"] == out["acked"] == 2_000, shown(out)
    assert [d[1:] for d in out["broken_detached"]] == [[f"broken_{out['cut'][0]}", "broken"]], shown(out)
    again = run("count", tmp_path)
    assert again["read_error"] is None and again["rows"] == again["unique"] == 2_000, shown(again)
    assert not any(d[2] == "broken-on-start" for d in again["broken_detached"]), shown(again)
