"""Cohen's kappa: a hand-computed example, scikit-learn's cohen_kappa_score, and the calibration gate."""

from __future__ import annotations

import math
import warnings

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.metrics import cohen_kappa_score

from ragmon.judge.agreement import cohen_kappa
from ragmon.judge.calibrate import ALL, Pair, calibrate


def test_hand_computed_example():
    # 50 items. humans yes/judge yes 20, humans yes/judge no 5, humans no/judge yes 10, humans no/judge no 15.
    # p_o = (20 + 15) / 50 = 0.70; humans say yes 25/50, judge says yes 30/50
    # p_e = 0.5 * 0.6 + 0.5 * 0.4 = 0.50;  kappa = (0.70 - 0.50) / (1 - 0.50) = 0.40
    human = [1] * 20 + [1] * 5 + [0] * 10 + [0] * 15
    judge = [1] * 20 + [0] * 5 + [1] * 10 + [0] * 15
    a = cohen_kappa(human, judge, labels=(0, 1))
    assert a.observed == pytest.approx(0.70) and a.expected == pytest.approx(0.50)
    assert a.kappa == pytest.approx(0.40)
    assert a.matrix == ((15, 10), (5, 20)) and a.n == 50


def test_always_pass_judge_has_high_agreement_and_no_kappa_credit():
    human = [1] * 90 + [0] * 10
    judge = [1] * 100
    a = cohen_kappa(human, judge, labels=(0, 1))
    assert a.observed == pytest.approx(0.9) and a.kappa == pytest.approx(0.0)


def test_undefined_when_both_raters_constant():
    assert cohen_kappa([1, 1, 1], [1, 1, 1], labels=(0, 1)).kappa is None
    assert cohen_kappa([], [], labels=(0, 1)).kappa is None


def test_length_mismatch_and_unknown_label_rejected():
    with pytest.raises(ValueError, match="differ in length"):
        cohen_kappa([1], [1, 0])
    with pytest.raises(ValueError, match="not one of"):
        cohen_kappa([2], [1], labels=(0, 1))


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2), st.integers(0, 2)), min_size=1, max_size=60))
def test_matches_scikit_learn(pairs):
    human, judge = [h for h, _ in pairs], [j for _, j in pairs]
    ours = cohen_kappa(human, judge).kappa
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # scikit-learn warns when kappa is undefined (0/0)
        theirs = cohen_kappa_score(human, judge)
    if ours is None:
        assert math.isnan(theirs) or theirs == 0.0
    else:
        assert ours == pytest.approx(theirs, abs=1e-9)


def _pairs(fp: str, category: str, human: list[int], judge: list[int], label: str = "grounded") -> list[Pair]:
    return [Pair(f"{fp}-{category}-{i}", category, label, h, j, fp, "heuristic")
            for i, (h, j) in enumerate(zip(human, judge, strict=True))]


def test_calibrate_per_fingerprint_and_stratum_with_gate():
    good = _pairs("A", "billing", [1, 1, 0, 0] * 5, [1, 1, 0, 0] * 5) + _pairs("A", "consent", [1, 0] * 3, [1, 0] * 3)
    bad = _pairs("B", "billing", [1, 1, 0, 0] * 5, [1, 0, 1, 0] * 5)
    results = {r.fingerprint: r for r in calibrate(good + bad, min_kappa=0.6, min_items=10)}
    assert set(results) == {"A", "B"}  # never pooled
    a = {(c.label, c.stratum): c for c in results["A"].cells}
    assert a[("grounded", ALL)].agreement.n == 26 and a[("grounded", ALL)].agreement.kappa == pytest.approx(1.0)
    assert a[("grounded", "consent")].agreement.n == 6
    assert results["A"].passed
    b = results["B"]
    assert not b.passed and "kappa 0.000 < 0.6" in b.failures[0]
    assert len(next(c for c in b.cells if c.stratum == ALL).disagreements) == 10


def test_gate_fails_closed_on_undefined_kappa_and_skips_small_strata():
    pairs = _pairs("C", "billing", [1] * 12, [1] * 12) + _pairs("C", "tiny", [1, 0], [0, 1])
    r = calibrate(pairs, min_kappa=0.5, min_items=10)[0]
    assert any("undefined" in f and "billing" in f for f in r.failures)
    assert not any("tiny" in f for f in r.failures)  # 2 items: shown, not gated
