"""The score role reaches the store only through ``ragmon.score.queries``: no SQL elsewhere in the package,
and the one store satisfies the seam's methods with the same parameters (and maybe more, optional)."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import ragmon.score
from ragmon.score.queries import ScoreStore
from ragmon.store.clickhouse import ClickHouseStore

SQL = re.compile(r"\b(SELECT|INSERT INTO|ALTER TABLE)\b")


def test_no_sql_outside_the_queries_module():
    package = Path(ragmon.score.__file__).parent
    offenders = [p.name for p in package.glob("*.py") if p.name != "queries.py" and SQL.search(p.read_text())]
    assert offenders == []


def test_clickhouse_store_has_every_seam_method_with_its_parameters():
    for name, member in inspect.getmembers(ScoreStore, inspect.isfunction):
        if name.startswith("_"):
            continue
        wanted = list(inspect.signature(member).parameters)
        actual = list(inspect.signature(getattr(ClickHouseStore, name)).parameters)
        assert actual[:len(wanted)] == wanted, name  # the store may take more (optional) parameters
