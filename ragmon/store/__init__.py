"""The ClickHouse store (a server, or the embedded chDB engine by default)."""

from ragmon.store.clickhouse import TABLES, ClickHouseStore
from ragmon.store.trace_rows import SELECT_TRACE_COLUMNS, SourcePosition, TraceColumns, row_to_trace

__all__ = ["TABLES", "SELECT_TRACE_COLUMNS", "ClickHouseStore", "SourcePosition", "TraceColumns", "row_to_trace"]
