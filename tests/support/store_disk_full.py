"""A store whose disk fills while the embedded engine writes a part, as a process of its own (chDB allows one engine
per process): ``python tests/support/store_disk_full.py SCENARIO [FILE] MOUNT`` prints one JSON line.

``MOUNT`` is a size-limited tmpfs (the caller mounts it); the store is ``MOUNT/chdb``. Scenarios:

- ``merge``: three batches of scores rows (~8 MB each, every one acknowledged), then ``OPTIMIZE … FINAL``
  (``merge``: the guard's thread held off meanwhile); as soon as the merge's directory appears, every free block is
  taken by a ballast file for a fifth of a second, then freed.
- ``merge-held``: the same, with the table keeping replaced parts 3 s (``old_parts_lifetime``) and the disk full
  for 12 s: longer than they are kept, while the incomplete part cannot be detached (that needs free space).
- ``merge-killed``: as ``merge-held``, but the disk stays full (taken again every 20 ms) and the process ends
  (``os._exit``) once the engine removed the replaced parts, the incomplete part still active (the guard looks no
  more once it failed to detach it); the caller deletes ``MOUNT/ballast`` and runs ``count``.
- ``insert``: one insert of 60,000 scores rows (~120 MB, so that it writes for a while), the disk filled before it
  but for ~20 MB more than the part needs (the engine reserves that much before it writes), then filled the same way
  as soon as its part's directory appears;
  an insert that fails as retryable is tried again once the disk is free, as ingest and score do.
- ``cut FILE``: one insert whose part has ``FILE`` cut to half its size just after the engine wrote it, standing
  for a disk that filled as the engine wrote that file last, and the engine's count of ignored writes stepped back by
  one, standing for the write it ignored then (a real full disk lands on a given small file too rarely to test).
- ``count``: open the store (a restart) and read.

Each prints what was acknowledged (``acked``: rows), how many writes the engine ignored (``ignored_writes``: the fault
visibly happened), whether a read of every row and column works (``read_error``), the rows read with FINAL and the
broken parts in ``detached/``. Imports only ragmon, so that it runs against any checkout (``PYTHONPATH``). Test
plumbing.
"""

from __future__ import annotations

import json
import os
import re
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import SecretStr

from ragmon.config import StoreSettings
from ragmon.errors import RetryableStoreError
from ragmon.store import ClickHouseStore

READ = "SELECT count(), sum(length(details)), uniqExact(trace_id) FROM {t} FINAL"
#: merge-held: replaced parts are kept this long (seconds) ...
HELD_LIFETIME = 3
#: ... while the disk stays full this long
HELD_SECONDS = 12
#: insert: rows in the one insert (2 KB of hex each)
INSERT_ROWS = 60_000
IGNORED = "SELECT sum(value) FROM system.events WHERE event = 'WriteBufferFromFileDescriptorWriteFailed'"


def fill(mount: Path, leave: int = 0) -> Path:
    """Take every free block of ``mount`` but ``leave`` bytes with a ballast file (grown when it exists); delete the
    file to give them back."""
    ballast = mount / "ballast"
    fd = os.open(ballast, os.O_CREAT | os.O_WRONLY, 0o600)
    try:
        for _ in range(20):  # the engine frees and takes blocks meanwhile: until nothing is left
            st = os.statvfs(mount)
            if st.f_bavail * st.f_frsize <= leave:
                break
            try:
                os.posix_fallocate(fd, os.fstat(fd).st_size, st.f_bavail * st.f_frsize - leave)
            except OSError:
                continue
    finally:
        os.close(fd)
    return ballast


def rows(first: int, n: int) -> dict[str, list[Any]]:
    """``n`` score rows that hardly compress (2 KB of hex each), trace ids from ``first`` on."""
    now = datetime.now(UTC)
    return {"trace_id": [f"t{first + i}" for i in range(n)], "query_id": [f"q{first + i}" for i in range(n)],
            "ts": [now] * n, "scored_at": [now] * n, "metric": ["faithfulness"] * n,
            "value": [(first + i) % 100 / 100 for i in range(n)], "status": ["ok"] * n,
            "details": [os.urandom(1024).hex() for _ in range(n)], "judge_fingerprint": ["fp"] * n}


def when_written(table_dir: Path, prefix: str, mount: Path, started: threading.Event,
                 seconds: float = 0.2) -> threading.Thread:
    """A thread that fills ``mount`` for ``seconds`` as soon as a ``prefix*`` directory (a part being written)
    appears."""

    def watch() -> None:
        started.wait()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not any(p.name.startswith(prefix) for p in table_dir.iterdir()):
            time.sleep(0.001)
        ballast = fill(mount)
        time.sleep(seconds)
        ballast.unlink()

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread


_BLOCK_PART = re.compile(r"^\d+_\d+_\d+_\d+$")
#: the part name's end of the merge of the three inserted parts (blocks 2 to 4, level 2), whatever the month
MERGED = "_2_4_2"


def merge(store: ClickHouseStore) -> None:
    """``OPTIMIZE … FINAL`` with the write guard's thread held off until it returns: the guard reads the disk once a
    second and, finding it full, stops merges and cancels those under way, and whether that reading lands inside the
    merge is a matter of timing (it did in one CI run: nothing broke). These scenarios are about a merge that outran
    the reading."""
    with store.guard.lock:
        store.command(f"OPTIMIZE TABLE {store.table('scores')} FINAL")


def keep_full(mount: Path) -> None:
    """Fill ``mount`` and keep it full (every 20 ms) for as long as the process lives."""
    while True:
        fill(mount)
        time.sleep(0.02)


def _await(table_dir: Path, prefix: str) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not any(p.name.startswith(prefix) for p in table_dir.iterdir()):
        time.sleep(0.001)


def table_dir(store: ClickHouseStore) -> Path:
    path = store.query("SELECT data_paths FROM system.tables WHERE database = {db:String} AND name = 'scores'",
                       {"db": store.database}).result_rows[0][0][0]
    return Path(path)


def settle(store: ClickHouseStore) -> None:
    """Let the store's write guard, where there is one, look for incomplete parts now (it also does every second)."""
    guard = getattr(store, "guard", None)  # a checkout without one (the proof that this scenario fails there)
    if guard is not None:
        guard.tick()


def report(store: ClickHouseStore, acked: int, **extra: Any) -> None:
    t = store.table("scores")
    try:
        n, _, unique = store.query(READ.format(t=t)).result_rows[0]
        read_error = None
    except Exception as exc:  # noqa: BLE001 - what a broken part does to a read is the finding
        n = unique = None
        read_error = str(exc)[:300]
    detached = store.query("SELECT table, name, reason FROM system.detached_parts WHERE database = {db:String}",
                           {"db": store.database}).result_rows
    print(json.dumps({"acked": acked, "read_error": read_error, "rows": n, "unique": unique,
                      "ignored_writes": int(store.query(IGNORED).result_rows[0][0] or 0),
                      "broken_detached": [list(d) for d in detached if "broken" in d[2] or "broken" in d[1]],
                      **extra}), flush=True)


def cut(store: ClickHouseStore, name: str) -> None:
    """The ``cut`` scenario: the first write of the insert leaves its part with ``name`` cut short."""
    guard, cuts = store.guard, []
    rose = guard.integrity.rose

    def cut_then_rose() -> bool:
        if not cuts:  # once: the part of the first write
            part = max((p for p in table_dir(store).iterdir() if _BLOCK_PART.match(p.name)),
                       key=lambda p: p.stat().st_mtime)
            with open(part / name, "r+b") as f:
                f.truncate(f.seek(0, os.SEEK_END) // 2)
            cuts.append(part.name)
            guard.integrity._counter -= 1  # the write the engine ignored as it cut the file
        return rose()

    guard.integrity.rose = cut_then_rose
    acked = store.insert_columns("scores", rows(0, 2000), dedup_token="cut-0")
    report(store, acked, cut=cuts)


def main() -> None:
    scenario, args, mount = sys.argv[1], sys.argv[2:-1], Path(sys.argv[-1])
    store = ClickHouseStore.open(StoreSettings(dsn=SecretStr(f"chdb://{mount / 'chdb'}")))
    if scenario == "count":
        report(store, 0)
        return
    acked, started = 0, threading.Event()
    if scenario == "merge-killed":
        store.command(f"ALTER TABLE {store.table('scores')} MODIFY SETTING old_parts_lifetime = {HELD_LIFETIME}")
        for b in range(3):
            acked += store.insert_columns("scores", rows(b * 8000, 8000), dedup_token=f"merge-{b}")
        where = table_dir(store)
        # the disk taken again every 20 ms until the process ends, and right before the guard's look; once a look
        # found the part broken, kept the copies and could not detach it (a detach reserves 1 MiB), the guard looks no
        # more: the process ends before it could try again. Room the engine freed meanwhile let a later look detach
        # the part in about 1 of 20 runs otherwise, which is not this scenario (and loses nothing either)
        look, stuck, filling = store.guard.integrity.look, [], threading.Event()

        def look_until_stuck(**kw: Any) -> list:
            if stuck:
                return []
            if filling.is_set():  # not before the merge began: it would find no room
                fill(mount)
            found = look(**kw)
            stuck.extend(b for b in found if not b.detached_as)
            return found

        store.guard.integrity.look = look_until_stuck
        watcher = threading.Thread(target=lambda: (started.wait(), _await(where, "tmp_merge_"), filling.set(),
                                                   keep_full(mount)), daemon=True)
        watcher.start()
        started.set()
        merge(store)
        deadline = time.monotonic() + 60  # the replaced parts removed by the engine, and copies of them kept
        while time.monotonic() < deadline and not (
                not any(_BLOCK_PART.match(p.name) for p in where.iterdir() if not p.name.endswith(MERGED))
                and len([p for p in (where / "detached").iterdir() if _BLOCK_PART.match(p.name)]) == 3):
            time.sleep(0.2)
        report(store, acked, merged_active=any(p.name.endswith(MERGED) for p in where.iterdir()),
               detached=sorted(p.name for p in (where / "detached").iterdir()))
        os._exit(0)  # the process ends with the disk full and the incomplete part still active
    if scenario in ("merge", "merge-held"):
        held = scenario == "merge-held"
        if held:  # the disk stays full for longer than the replaced parts are kept
            store.command(f"ALTER TABLE {store.table('scores')} MODIFY SETTING old_parts_lifetime = {HELD_LIFETIME}")
        for b in range(3):
            acked += store.insert_columns("scores", rows(b * 8000, 8000), dedup_token=f"merge-{b}")
        watcher = when_written(table_dir(store), "tmp_merge_", mount, started, HELD_SECONDS if held else 0.2)
        started.set()
        merge(store)
        watcher.join()
        settle(store)
        report(store, acked)
        return
    if scenario == "insert":
        # an insert that takes a while to write (~120 MB), and a disk filled but for ~20 MB more than it needs: the
        # engine reserves the room it expects and starts, and the ballast takes the rest while it writes
        batch, retried = rows(0, INSERT_ROWS), 0
        fill(mount, leave=(2 * 1024 + 64) * INSERT_ROWS + (20 << 20))
        watcher = when_written(table_dir(store), "tmp_insert_", mount, started)
        started.set()
        while True:
            try:
                acked += store.insert_columns("scores", batch, dedup_token="insert-0")
                break
            except RetryableStoreError:  # the disk was full: what ingest and score do (after a backoff)
                retried += 1
                watcher.join()
        watcher.join()
        settle(store)
        report(store, acked, retried=retried)
        return
    if scenario == "cut":
        cut(store, *args)
        return
    raise SystemExit(f"unknown scenario {scenario!r}")


if __name__ == "__main__":
    main()
