"""The promotion rule `shadow compare` and `ab compare` share: harm rejects, only all-ok promotes, the rest holds."""

from __future__ import annotations

import itertools

import pytest

from ragmon.metrics.promotion import STATUSES, verdict


def test_the_rule_over_every_combination_of_three_measures():
    for combo in itertools.product(STATUSES, repeat=3):
        expected = "reject" if "harm" in combo else "promote" if set(combo) == {"ok"} else "hold"
        assert verdict(combo) == expected, combo


def test_a_measure_without_data_holds_even_beside_ok_ones():
    assert verdict(["ok"] * 6 + ["no_data"]) == "hold"
    assert verdict(["ok"] * 6 + ["inconclusive"]) == "hold"


def test_nothing_measured_is_no_promotion():
    assert verdict([]) == "hold"


def test_an_unknown_status_is_refused():
    with pytest.raises(ValueError, match="unknown measure status"):
        verdict(["ok", "fine"])
