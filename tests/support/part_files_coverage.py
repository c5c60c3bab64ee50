"""Which files of a part the write guard would not see cut short, as a process of its own (chDB allows one engine
per process): ``python tests/support/part_files_coverage.py DIR`` prints one JSON line.

Opens a store in ``DIR`` (every migration applied), writes random rows (``generateRandom``) into each MergeTree table,
then for one part of each, cuts each of its files in turn to half its size and asks what the guard asks of a suspect
part (``PartIntegrity.problem``: ``CHECK TABLE … PART``, then ``ragmon.store.part_files``). A file it passes is
printed under its table (``missed``); the file is put back before the next. Imports only ragmon. Test plumbing.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from pydantic import SecretStr

from ragmon.config import StoreSettings
from ragmon.store import ClickHouseStore

ROWS = 40


def main() -> None:
    store = ClickHouseStore.open(StoreSettings(dsn=SecretStr(f"chdb://{Path(sys.argv[1])}")))
    db = store.database
    tables = [str(r[0]) for r in store.query(
        "SELECT name FROM system.tables WHERE database = {db:String} AND engine LIKE '%MergeTree' ORDER BY name",
        {"db": db}).result_rows]
    missed: dict[str, list[str]] = {}
    files = 0
    for table in tables:
        store.command(f"INSERT INTO {store.table(table)} SELECT * FROM generateRandom() LIMIT {ROWS} "
                      "SETTINGS max_partitions_per_insert_block = 0, throw_on_max_partitions_per_insert_block = 0")
        part = min((p for p in store.guard.integrity.parts().values() if (p.database, p.table) == (db, table)
                    and p.active), key=lambda p: (-p.rows, p.name))  # the largest active part
        path = part.path
        missed[table] = []
        for file in sorted(p for p in Path(path).rglob("*") if p.is_file()):
            raw = file.read_bytes()
            if not raw:
                continue
            files += 1
            file.write_bytes(raw[: len(raw) // 2])
            try:
                if store.guard.integrity.problem(part) is None:
                    missed[table].append(str(file.relative_to(path)))
            finally:
                file.write_bytes(raw)
    print(json.dumps({"tables": tables, "files": files, "missed": missed}), flush=True)
    os._exit(0)  # the engine's shutdown is not what is tested


if __name__ == "__main__":
    main()
