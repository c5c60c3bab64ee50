"""The gated-result shape shared by the gate's reports and judge calibration: rows with failures → passed, rows
per stratum then ALL, and the JSON order (passed, parameters, strata)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from ragmon.gated import ALL, Gated, StrataReport, per_stratum


@dataclass(frozen=True, slots=True)
class Line:
    stratum: str
    n: int
    failures: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Report(StrataReport[Line]):
    k: int
    rows: tuple[Line, ...]

    def parameters(self) -> dict[str, object]:
        return {"k": self.k}


@dataclass(frozen=True, slots=True)
class Cells(Gated[Line]):
    rows: tuple[Line, ...]


def _line(name: str, items: Sequence[tuple[str, int]]) -> Line:
    total = sum(v for _, v in items)
    return Line(name, total, ("n",) if total > 5 else ())


def test_rows_per_stratum_in_name_order_then_all() -> None:
    items = [("b", 1), ("a", 2), ("b", 3), ("c", 1)]
    rows = per_stratum(items, lambda item: item[0], _line)
    assert [(r.stratum, r.n) for r in rows] == [("a", 2), ("b", 4), ("c", 1), (ALL, 7)]
    assert per_stratum([], lambda item: item[0], _line) == (Line(ALL, 0),)


def test_passed_when_no_row_failed() -> None:
    assert Cells((Line("a", 1), Line("b", 2))).passed
    assert not Cells((Line("a", 1), Line("b", 2, ("n",)))).passed
    assert Cells(()).passed


def test_as_dict_is_passed_then_parameters_then_strata() -> None:
    report = Report(3, per_stratum([("b", 9), ("a", 1)], lambda item: item[0], _line))
    assert json.dumps(report.as_dict()) == json.dumps({
        "passed": False, "k": 3, "strata": [{"stratum": "a", "n": 1, "failures": []},
                                            {"stratum": "b", "n": 9, "failures": ["n"]},
                                            {"stratum": ALL, "n": 10, "failures": ["n"]}]})
