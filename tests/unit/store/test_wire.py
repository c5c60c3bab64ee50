"""The read API's value encoding (``ragmon.store.wire``): every value a query returns comes back equal and of the
same type, so a read command prints the same over HTTP as locally; data it cannot have made is a ValueError."""

from __future__ import annotations

import ipaddress
import json
import math
import uuid
from datetime import UTC, date, datetime, timedelta, timezone
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ragmon.store import wire

scalars = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2**64), max_value=2**64), st.floats(allow_nan=False),
    st.text(), st.binary(max_size=64), st.datetimes(), st.datetimes(timezones=st.just(UTC)), st.dates(),
    st.uuids(), st.decimals(allow_nan=False, allow_infinity=False), st.timedeltas(),
)
values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.tuples(inner, inner),
    st.dictionaries(st.one_of(st.text(max_size=5), st.integers()), inner, max_size=3)), max_leaves=12)


def _same(a: object, b: object) -> bool:
    if type(a) is not type(b):
        return False
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))  # type: ignore[arg-type]
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)  # type: ignore[index]
    return a == b


@given(values)
def test_every_value_comes_back_equal_and_of_the_same_type(value: object) -> None:
    assert _same(wire.decode(json.loads(json.dumps(wire.encode(value), allow_nan=False))), value)


def test_non_finite_floats_offsets_and_addresses() -> None:
    sent = [math.inf, -math.inf, datetime(2026, 1, 2, 3, 4, 5, 6, tzinfo=timezone(timedelta(hours=2))),
            ipaddress.ip_address("10.0.0.1"), ipaddress.ip_address("::1"), date(2026, 1, 1), uuid.UUID(int=5),
            Decimal("1.10")]
    back = wire.decode(json.loads(json.dumps(wire.encode(sent), allow_nan=False)))
    assert _same(back, sent)
    nan = wire.decode(wire.encode(math.nan))
    assert isinstance(nan, float) and math.isnan(nan)


@pytest.mark.parametrize("data", [
    {"$evil": 1}, {"$t": 1}, {"$m": [[1]]}, {"$m": [[[1], 2]]}, {"$dt": "not a time"}, {"$b": "%%%"},
    {"$u": "x"}, {"$dec": "abc"}, {"$f": "one"}, {"a": 1, "b": 2}, {"$dt": ["2026-01-01"]},
])
def test_data_encode_cannot_have_made_is_a_value_error(data: object) -> None:
    with pytest.raises(ValueError):
        wire.decode(data)


def test_an_unknown_type_is_refused_not_sent_approximately() -> None:
    with pytest.raises(TypeError):
        wire.encode(object())
