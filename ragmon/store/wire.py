"""Query values as JSON and back, exactly: what the read API (``ragmon.store.read_api``) sends and the remote
store (``ragmon.store.remote``) receives, so a read command prints the same over HTTP as it does locally.

Owns the encoding only. JSON has no datetime, tuple, bytes, UUID, decimal, IP address, map with non-text keys or
NaN; each travels as a one-key object tagged ``$…`` (a plain JSON object never occurs otherwise: every mapping is
sent as ``$m``). Pure: no I/O. A value of any other type is a ``TypeError`` (a new column type must be added
here, not sent approximately).
"""

from __future__ import annotations

import base64
import ipaddress
import math
import uuid
from collections.abc import Callable
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from typing import Any

_DECODERS: dict[str, Callable[[Any], Any]] = {
    "$dt": datetime.fromisoformat,
    "$d": date.fromisoformat,
    "$tm": time.fromisoformat,
    "$td": lambda v: timedelta(microseconds=int(v)),
    "$u": uuid.UUID,
    "$dec": Decimal,
    "$b": lambda v: base64.b64decode(v.encode("ascii"), validate=True),
    "$f": float,
    "$ip": ipaddress.ip_address,
}


def encode(value: Any) -> Any:
    """``value`` as JSON-ready data (see the module docstring)."""
    if value is None or isinstance(value, bool | str):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return value if math.isfinite(value) else {"$f": repr(value)}
    if isinstance(value, list):
        return [encode(v) for v in value]
    if isinstance(value, tuple):
        return {"$t": [encode(v) for v in value]}
    if isinstance(value, dict):
        return {"$m": [[encode(k), encode(v)] for k, v in value.items()]}
    if isinstance(value, datetime):  # before date: a datetime is a date
        return {"$dt": value.isoformat()}
    if isinstance(value, date):
        return {"$d": value.isoformat()}
    if isinstance(value, time):
        return {"$tm": value.isoformat()}
    if isinstance(value, timedelta):
        return {"$td": (value.days * 86_400 + value.seconds) * 1_000_000 + value.microseconds}
    if isinstance(value, uuid.UUID):
        return {"$u": str(value)}
    if isinstance(value, Decimal):
        return {"$dec": str(value)}
    if isinstance(value, bytes | bytearray | memoryview):
        return {"$b": base64.b64encode(bytes(value)).decode("ascii")}
    if isinstance(value, ipaddress.IPv4Address | ipaddress.IPv6Address):
        return {"$ip": str(value)}
    raise TypeError(f"cannot send a {type(value).__name__} value over the read API")


def decode(data: Any) -> Any:
    """The value ``encode`` made ``data`` of. Raises ``ValueError`` on data ``encode`` cannot have made."""
    if isinstance(data, list):
        return [decode(v) for v in data]
    if not isinstance(data, dict):
        if data is None or isinstance(data, bool | int | float | str):
            return data
        raise ValueError(f"unexpected {type(data).__name__} in read API data")
    if len(data) != 1:
        raise ValueError("a read API object has exactly one $-tag")
    ((tag, inner),) = data.items()
    if tag == "$t":
        return tuple(decode(v) for v in _list(inner))
    if tag == "$m":
        try:
            return {decode(k): decode(v) for k, v in (_pair(p) for p in _list(inner))}
        except TypeError:  # a list as a key
            raise ValueError("a $m key must be a plain value") from None
    decoder = _DECODERS.get(tag)
    if decoder is None or not isinstance(inner, str | int):
        raise ValueError(f"unknown read API tag {tag!r}")
    try:
        return decoder(inner)
    except (TypeError, ValueError, ArithmeticError) as exc:
        raise ValueError(f"bad {tag} value in read API data: {exc}") from None


def _list(value: Any) -> list[Any]:
    if not isinstance(value, list):
        raise ValueError("a $t or $m tag holds a list")
    return value


def _pair(value: Any) -> tuple[Any, Any]:
    if not isinstance(value, list) or len(value) != 2:
        raise ValueError("a $m entry is a [key, value] pair")
    return value[0], value[1]
