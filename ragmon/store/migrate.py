"""Versioned, idempotent schema migrations from the SQL files in ``migrations/``.

File ``NNNN_name.sql`` is version NNNN. Each statement is idempotent (``IF NOT EXISTS``), applied versions
are recorded in ``schema_migrations`` with a checksum, and running the migrator twice is a no-op. With a
cluster configured, DDL gets ``ON CLUSTER`` and every ``*MergeTree`` engine its ``Replicated*`` twin.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from importlib import resources
from string import Template

from ragmon.config import StoreSettings

_ENGINE = re.compile(r"ENGINE\s*=\s*(\w*MergeTree)(\((?P<args>[^)]*)\))?")
_TABLE = re.compile(r"CREATE TABLE IF NOT EXISTS\s+[\w$.{}]+?\.(\w+)")


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str

    @property
    def checksum(self) -> str:
        return hashlib.sha256(self.sql.encode()).hexdigest()[:16]


def load_migrations() -> list[Migration]:
    """Every migration shipped with the package, in version order."""
    found = []
    for entry in resources.files("ragmon.store").joinpath("migrations").iterdir():
        if entry.name.endswith(".sql"):
            version, _, name = entry.name[:-4].partition("_")
            found.append(Migration(int(version), name, entry.read_text(encoding="utf-8")))
    return sorted(found, key=lambda m: m.version)


def render(migration: Migration, settings: StoreSettings) -> list[str]:
    """The migration's statements with database, cluster and TTL filled in."""
    on_cluster = f"ON CLUSTER {settings.cluster}" if settings.cluster else ""
    text = Template(migration.sql).substitute(
        db=settings.database,
        on_cluster=on_cluster,
        traces_ttl_days=settings.traces_ttl_days,
        drift_checks_ttl_days=settings.drift_checks_ttl_days,
    )
    statements = []
    for chunk in _split_statements(text):
        if settings.cluster:
            chunk = _replicated(chunk, settings.database)
        statements.append(chunk)
    return statements


def _split_statements(text: str) -> list[str]:
    lines = [line for line in text.splitlines() if not line.lstrip().startswith("--")]
    return [s.strip() for s in "\n".join(lines).split(";") if s.strip()]


def _replicated(statement: str, database: str) -> str:
    table = _TABLE.search(statement)
    if not table:
        return statement

    def swap(match: re.Match[str]) -> str:
        args = (match.group("args") or "").strip()
        zk = f"'/clickhouse/tables/{{shard}}/{database}/{table.group(1)}', '{{replica}}'"
        return f"ENGINE = Replicated{match.group(1)}({zk}{', ' + args if args else ''})"

    return _ENGINE.sub(swap, statement, count=1)


TRACKING_TABLE = """CREATE TABLE IF NOT EXISTS {db}.schema_migrations {on_cluster}
(version UInt32, name String, checksum String, applied_at DateTime64(3, 'UTC') DEFAULT now64(3))
ENGINE = {engine} ORDER BY version"""


def tracking_table_sql(settings: StoreSettings) -> str:
    engine = (
        f"ReplicatedReplacingMergeTree('/clickhouse/tables/{{shard}}/{settings.database}/schema_migrations', "
        "'{replica}', applied_at)"
        if settings.cluster
        else "ReplacingMergeTree(applied_at)"
    )
    return TRACKING_TABLE.format(
        db=settings.database, on_cluster=f"ON CLUSTER {settings.cluster}" if settings.cluster else "", engine=engine
    )
