"""Simulated checks of the trace tests (KS, PSI: traces counted as independent draws): on independent draws the
false-alarm rate with no drift stays near the nominal level, and a documented shift is detected. Runs the
production decision path (registry tests on quantile sketches + BH + effect gate) on seeded, vectorised draws;
a few seconds in all. The window tests on realistic traffic are in test_traffic.py."""

from __future__ import annotations

import numpy as np
import pytest

from ragmon.drift.method.decide import Candidate, decide
from ragmon.drift.method.registry import Comparison, get_test
from ragmon.drift.method.summary import LEVELS, ContinuousSummary

ALPHA = 0.05


def _summaries(values: np.ndarray) -> list[ContinuousSummary]:
    q = np.quantile(values, LEVELS, axis=1).T
    return [ContinuousSummary(values.shape[1], float(m), float(s), tuple(row))
            for m, s, row in zip(values.mean(axis=1), values.std(axis=1), q, strict=True)]


def _check(ref: np.ndarray | list[ContinuousSummary], cur: np.ndarray | list[ContinuousSummary], *,
           adjust: bool = True, effect: float = 0.1) -> list[bool]:
    """One check over the groups (rows): which groups the KS test declares drifted."""
    ks = get_test("ks")
    rs = _summaries(ref) if isinstance(ref, np.ndarray) else ref
    cs = _summaries(cur) if isinstance(cur, np.ndarray) else cur
    cands = [Candidate(ks, Comparison.of_pair(r, c), ALPHA, effect, 100) for r, c in zip(rs, cs, strict=True)]
    return [d.drifted for d in decide(cands, adjust=adjust)]


@pytest.mark.slow
def test_false_alarm_rate_without_drift_is_near_nominal() -> None:
    rng = np.random.default_rng(20261202)
    checks, groups, n_ref, n_cur = 200, 20, 1000, 300
    any_alarm_bh = any_alarm_raw = 0
    any_alarm_gated = 0
    for _ in range(checks):
        ref = _summaries(rng.normal(size=(groups, n_ref)))
        cur = _summaries(rng.normal(size=(groups, n_cur)))
        any_alarm_bh += any(_check(ref, cur, effect=0.0))
        any_alarm_raw += any(_check(ref, cur, adjust=False, effect=0.0))
        any_alarm_gated += any(_check(ref, cur))
    rate_bh, rate_raw, rate_gated = any_alarm_bh / checks, any_alarm_raw / checks, any_alarm_gated / checks
    print(f"P(any alarm per check): BH {rate_bh:.3f}, uncorrected {rate_raw:.3f}, BH+effect {rate_gated:.3f}")
    # BH at q = 0.05 over 20 null tests: P(any alarm in a check) ≤ 0.05 (the KS asymptotic p-value from a
    # 101-point sketch is slightly conservative). Binomial sd at 200 checks ≈ 0.015.
    assert 0.005 <= rate_bh <= 0.09, rate_bh
    # Without correction the same checks alarm most of the time: 1 − 0.95^20 ≈ 0.64.
    assert rate_raw >= 0.4, rate_raw
    # The effect gate (Wasserstein ≥ 0.1 σ) only removes alarms.
    assert rate_gated <= rate_bh


@pytest.mark.slow
def test_per_test_level_is_nominal() -> None:
    rng = np.random.default_rng(7)
    ref, cur = rng.normal(size=(3000, 1000)), rng.normal(size=(3000, 300))
    rejected = np.mean(_check(ref, cur, adjust=False, effect=0.0))
    print(f"per-test rejection rate at alpha=0.05: {rejected:.4f}")
    assert 0.03 <= rejected <= 0.065, rejected  # nominal 0.05, sd ≈ 0.004


@pytest.mark.slow
def test_documented_shift_is_detected() -> None:
    """0.3 σ at m = 1,000 current traces against a 10,000-trace reference, among 19 undrifted groups."""
    rng = np.random.default_rng(3)
    detected = false = 0
    trials = 40
    for _ in range(trials):
        ref = rng.normal(size=(20, 10_000))
        cur = rng.normal(size=(20, 1_000))
        cur[0] += 0.3
        flags = _check(ref, cur)
        detected += flags[0]
        false += sum(flags[1:])
    print(f"detected {detected}/{trials}, false discoveries {false} of {trials * 19} null tests")
    assert detected == trials
    # BH bounds the false discovery rate at 0.05·19/20 in expectation; allow sampling noise around it.
    assert false / (false + detected) <= 0.15, false


def test_small_windows_do_not_alarm_on_psi_alone() -> None:
    """PSI > 0.1 is common at 100 traces without drift (E[PSI] ≈ (bins − 1)/m = 0.09 at m = 100, so about
    40 % of windows exceed it); the min-sample gate keeps those windows out."""
    rng = np.random.default_rng(9)
    psi = get_test("psi")
    ref, cur = _summaries(rng.normal(size=(50, 5000))), _summaries(rng.normal(size=(50, 100)))
    decisions = decide([Candidate(psi, Comparison.of_pair(r, c), ALPHA, 0.1, 200)
                        for r, c in zip(ref, cur, strict=True)])
    assert all(d.status == "insufficient_data" and not d.drifted for d in decisions)
    ungated = decide([Candidate(psi, Comparison.of_pair(r, c), 1.0, 0.1, 0) for r, c in zip(ref, cur, strict=True)])
    assert sum(d.outcome is not None and d.outcome.effect > 0.1 for d in ungated) >= 10
