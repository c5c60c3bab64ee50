"""A WHERE clause from filters, with every value a ``{name:Type}`` query parameter.

Owns ``Where``: conditions ``column op {name:Type}`` joined by AND, built from a column name, an operator and
a ClickHouse type that are checked against fixed patterns (they come from code, never from a user), and a value
that only ever travels in the parameters. ``optional`` drops a filter whose value is None, so a query with
optional filters reads as one chain instead of a list of ``if``s. Must not format a value into SQL text, run a
query, or know any table.
"""

from __future__ import annotations

import re
from typing import Any

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
#: a ClickHouse type as written in a placeholder: String, Int64, DateTime64(3, 'UTC'), Array(String)…
_TYPE = re.compile(r"[A-Za-z][A-Za-z0-9_]*(\([A-Za-z0-9_ ,'()]*\))?")
OPERATORS = ("=", "!=", "<", "<=", ">", ">=", "IN", "NOT IN")


class Where:
    """Conditions joined by AND; ``clause()`` is ``(sql, parameters)``, with ``1`` for no condition at all."""

    def __init__(self) -> None:
        self._conditions: list[str] = []
        self._parameters: dict[str, Any] = {}

    def require(self, column: str, op: str, sql_type: str, value: Any, *, name: str | None = None) -> Where:
        """Add ``column op {name:sql_type}`` with ``value`` bound to ``name`` (the column's name by default).

        ``ValueError`` for a None value (an unset required filter is a bug, not "no filter"), an operator not in
        ``OPERATORS``, a column, name or type that is not a plain identifier or type, or a name used twice.
        """
        if value is None:
            raise ValueError(f"expected a value for the required filter on {column}, got None")
        name = name or column.rpartition(".")[2]
        for what, text, pattern in (("column", column, _IDENTIFIER), ("parameter name", name, _NAME),
                                    ("type", sql_type, _TYPE)):
            if not pattern.fullmatch(text):
                raise ValueError(f"expected a plain {what}, got {text!r}")
        if op not in OPERATORS:
            raise ValueError(f"expected an operator in {OPERATORS}, got {op!r}")
        if name in self._parameters:
            raise ValueError(f"expected each parameter name once, got {name!r} twice")
        self._conditions.append(f"{column} {op} {{{name}:{sql_type}}}")
        self._parameters[name] = value
        return self

    def optional(self, column: str, op: str, sql_type: str, value: Any, *, name: str | None = None) -> Where:
        """``require``, or nothing when ``value`` is None (the filter was not asked for)."""
        return self if value is None else self.require(column, op, sql_type, value, name=name)

    def clause(self) -> tuple[str, dict[str, Any]]:
        """The conditions joined by AND (``1`` when there are none) and a copy of their parameters."""
        return " AND ".join(self._conditions) or "1", dict(self._parameters)
