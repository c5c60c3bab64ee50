"""The ClickHouse store (a server, or the embedded chDB engine by default).

The names below are loaded on first use (PEP 562), not when the package is imported: settings validation
imports the pure ``ragmon.store.dsn``, and that must not drag in the adapter, clickhouse-connect or chDB (nor
the ``ragmon.config`` import the adapter makes back).
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ragmon.store.clickhouse import TABLES, ClickHouseStore
    from ragmon.store.trace_rows import SELECT_TRACE_COLUMNS, SourcePosition, TraceColumns, row_to_trace

_HOMES = {
    "TABLES": "ragmon.store.clickhouse",
    "ClickHouseStore": "ragmon.store.clickhouse",
    "SELECT_TRACE_COLUMNS": "ragmon.store.trace_rows",
    "SourcePosition": "ragmon.store.trace_rows",
    "TraceColumns": "ragmon.store.trace_rows",
    "row_to_trace": "ragmon.store.trace_rows",
}

__all__ = ["TABLES", "SELECT_TRACE_COLUMNS", "ClickHouseStore", "SourcePosition", "TraceColumns", "row_to_trace"]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(home), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
