"""The WHERE clause builder: conditions joined by AND, every value a parameter, never SQL text."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ragmon.where import Where

SINCE = datetime(2026, 11, 1, tzinfo=UTC)
HOSTILE = "x' OR '1'='1'); DROP TABLE ragmon.traces; -- {since:String} }"


def test_conditions_are_joined_by_and_with_their_parameters() -> None:
    sql, params = (Where().require("ts", ">=", "DateTime64(3, 'UTC')", SINCE, name="since")
                   .optional("retriever_name", "=", "String", "hybrid", name="retriever")
                   .optional("variant", "=", "String", None)
                   .require("trace_id", "IN", "Array(String)", ["a", "b"], name="ids").clause())
    assert sql == ("ts >= {since:DateTime64(3, 'UTC')} AND retriever_name = {retriever:String} "
                   "AND trace_id IN {ids:Array(String)}")
    assert params == {"since": SINCE, "retriever": "hybrid", "ids": ["a", "b"]}


def test_no_condition_is_true_and_the_parameter_name_defaults_to_the_column() -> None:
    assert Where().optional("variant", "=", "String", None).clause() == ("1", {})
    assert Where().require("l.week", "=", "String", "2026-W49").clause() == ("l.week = {week:String}",
                                                                             {"week": "2026-W49"})


def test_a_hostile_value_goes_in_a_parameter_never_in_the_sql() -> None:
    sql, params = Where().require("retriever_name", "=", "String", HOSTILE, name="retriever").clause()
    assert sql == "retriever_name = {retriever:String}" and params == {"retriever": HOSTILE}


@given(st.text())
def test_any_value_leaves_the_sql_text_alone(value: str) -> None:
    sql, params = Where().optional("variant", "=", "String", value).clause()
    assert sql == "variant = {variant:String}" and params["variant"] == value


@pytest.mark.parametrize("column, op, sql_type, name", [
    ("variant = 'x' OR 1", "=", "String", "variant"),
    ("variant", "= 1 OR", "String", "variant"),
    ("variant", "LIKE", "String", "variant"),
    ("variant", "=", "String} OR 1 = 1 --", "variant"),
    ("variant", "=", "String", "v:String} OR {w"),
    ("", "=", "String", "variant"),
])
def test_anything_but_plain_identifiers_operators_and_types_is_refused(column: str, op: str, sql_type: str,
                                                                       name: str) -> None:
    with pytest.raises(ValueError, match="expected"):
        Where().require(column, op, sql_type, "v", name=name)


def test_a_required_filter_without_a_value_and_a_name_used_twice_are_refused() -> None:
    with pytest.raises(ValueError, match="got None"):
        Where().require("ts", ">=", "DateTime64(3, 'UTC')", None, name="since")
    with pytest.raises(ValueError, match="twice"):
        Where().require("ts", ">=", "DateTime64(3)", SINCE, name="t").require("ts", "<", "DateTime64(3)", SINCE,
                                                                             name="t")


def test_the_clause_is_a_copy() -> None:
    where = Where().require("variant", "=", "String", "shadow")
    _, params = where.clause()
    params["variant"] = HOSTILE
    assert where.clause()[1] == {"variant": "shadow"}
