"""Results gated on thresholds: rows that each name the checks they missed, and the verdict over them.

Owns the one shape that the release gate (retrieval and generation) and judge calibration share: a frozen
result whose ``rows`` each carry ``failures`` (the checks that row missed; empty when it met them all), which
``passed`` when no row missed anything; for the gate's per-stratum reports also the rows per stratum then
``ALL`` (``per_stratum``) and the JSON form (``as_dict``: ``passed``, the parameters, the rows under
``strata``) that the CLI prints and the run artifacts keep.
Pure data: no I/O, no rendering, no thresholds of its own; it must not import any role's package (they
import it).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict
from typing import Generic, Protocol, TypeVar

#: the row over every stratum together
ALL = "ALL"


class Row(Protocol):
    """A row of a gated result: the names of the checks it missed (empty when it passed)."""

    @property
    def failures(self) -> tuple[str, ...]: ...


R = TypeVar("R", bound=Row)
T = TypeVar("T")


class Gated(Generic[R]):
    """Mixin for a frozen result whose ``rows`` each carry ``failures``: passed when no row missed anything."""

    __slots__ = ()
    rows: tuple[R, ...]

    @property
    def passed(self) -> bool:
        return not any(row.failures for row in self.rows)


class StrataReport(Gated[R]):
    """Mixin for a per-stratum report: ``as_dict`` is ``passed``, then ``parameters()``, then ``strata``."""

    __slots__ = ()

    def parameters(self) -> dict[str, object]:
        """What the verdict was reached under (thresholds, k, judge…), JSON-ready, in output order."""
        raise NotImplementedError

    def as_dict(self) -> dict[str, object]:
        return {"passed": self.passed, **self.parameters(), "strata": [asdict(row) for row in self.rows]}


def per_stratum(items: Iterable[T], stratum: Callable[[T], str], row: Callable[[str, Sequence[T]], R]) -> tuple[R, ...]:
    """One row per stratum in name order, then the ``ALL`` row over every item: no stratum averages away."""
    every = list(items)
    strata: dict[str, list[T]] = {}
    for item in every:
        strata.setdefault(stratum(item), []).append(item)
    return (*(row(name, strata[name]) for name in sorted(strata)), row(ALL, every))
