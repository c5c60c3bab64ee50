"""Verdict rules: no thresholds → hold; each threshold rejects, passes or holds as documented; worst wins."""

from __future__ import annotations

import pytest

from ragmon.shadow.result import QualityDelta, Verdict
from ragmon.shadow.stats import PairedDifferenceResult, SignTestResult
from ragmon.shadow.verdict import EXIT_CODES, Thresholds, combine, decide, parse_quality_drops


def q(metric: str, mean: float, low: float, high: float, n: int = 100, fp: str = "fp1") -> QualityDelta:
    r = PairedDifferenceResult(n, 0.5, 0.5 + mean, mean, low, high, 0.95, 2000, 0, SignTestResult(0, 0, n, 1.0))
    return QualityDelta(metric, "judge", fp, r)


def run(t: Thresholds, **kw) -> Verdict:
    args = {"pairs": 500, "overlap": 0.6, "k": 10, "latency_p95_delta_ms": 5.0, "error_rate_delta": 0.0,
            "quality": ()}
    args.update(kw)
    return decide(t, **args)


def test_no_thresholds_is_hold_and_says_so():
    v = run(Thresholds())
    assert v.decision == "hold" and "no thresholds given" in v.reasons[0]


def test_point_thresholds():
    assert run(Thresholds(min_overlap=0.5)).decision == "promote"
    v = run(Thresholds(min_overlap=0.7))
    assert v.decision == "reject" and "overlap@10 0.600" in v.reasons[0]
    assert run(Thresholds(max_latency_p95_delta_ms=4.0)).decision == "reject"
    assert run(Thresholds(max_latency_p95_delta_ms=10.0)).decision == "promote"
    assert run(Thresholds(max_latency_p95_delta_ms=10.0), latency_p95_delta_ms=None).decision == "hold"
    assert run(Thresholds(max_error_rate_delta=0.01), error_rate_delta=0.02).decision == "reject"


def test_min_pairs_holds_and_alone_never_promotes():
    assert run(Thresholds(min_pairs=1000, min_overlap=0.1)).decision == "hold"
    v = run(Thresholds(min_pairs=100))
    assert v.decision == "hold" and "no other threshold" in v.reasons[0]
    assert run(Thresholds(min_overlap=0.1), pairs=0).decision == "hold"


def test_quality_uses_the_interval():
    t = Thresholds(max_quality_drop={"faithfulness": 0.02})
    assert run(t, quality=(q("faithfulness", -0.10, -0.14, -0.06),)).decision == "reject"
    assert run(t, quality=(q("faithfulness", 0.01, -0.01, 0.03),)).decision == "promote"
    held = run(t, quality=(q("faithfulness", -0.02, -0.05, 0.01),))
    assert held.decision == "hold" and "inconclusive" in held.reasons[0]
    missing = run(t, quality=(q("relevance", 0.0, -0.01, 0.01),))
    assert missing.decision == "hold" and "faithfulness" in missing.reasons[0]
    # two fingerprints are judged separately: one clear failure rejects
    both = run(t, quality=(q("faithfulness", 0.0, -0.01, 0.01, fp="a"), q("faithfulness", -0.2, -0.3, -0.1, fp="b")))
    assert both.decision == "reject"


def test_combine_and_exit_codes():
    p, h, r = Verdict("promote", ()), Verdict("hold", ()), Verdict("reject", ())
    assert combine([p, p], ["a", "b"]).decision == "promote"
    assert combine([p, h], ["a", "b"]).decision == "hold"
    v = combine([p, h, r], ["a", "b", "c"])
    assert v.decision == "reject" and "c" in v.reasons[0]
    assert combine([], []).decision == "hold"
    assert EXIT_CODES == {"promote": 0, "reject": 1, "hold": 4}


def test_threshold_validation_and_parsing():
    assert parse_quality_drops(["faithfulness=0.02", " ndcg_at_k = 0.1"]) == {"faithfulness": 0.02, "ndcg_at_k": 0.1}
    for bad in ("faithfulness", "=0.1", "x=-1", "x=abc", "x=nan"):
        with pytest.raises(ValueError, match="METRIC=X"):
            parse_quality_drops([bad])
    with pytest.raises(ValueError, match="min_overlap"):
        Thresholds(min_overlap=1.5)
    with pytest.raises(ValueError, match="min_pairs"):
        Thresholds(min_pairs=0)


def test_for_a_rate_of_wrong_decisions_a_rise_is_the_regression():
    t = Thresholds(max_quality_drop={"wrong_refusal": 0.02, "missed_refusal": 0.02})
    worse = run(t, quality=(q("wrong_refusal", 0.305, 0.235, 0.380), q("missed_refusal", 0.0, -0.01, 0.01)))
    assert worse.decision == "reject" and "vs max rise 0.020 (lower is better)" in worse.reasons[0]
    better = run(t, quality=(q("wrong_refusal", -0.2, -0.3, -0.1), q("missed_refusal", 0.0, -0.01, 0.01)))
    assert better.decision == "promote"
    assert run(t, quality=(q("wrong_refusal", 0.01, -0.01, 0.05), q("missed_refusal", 0.0, -0.01, 0.01))
               ).decision == "hold"


def test_a_point_interval_from_too_few_pairs_decides_nothing():
    t = Thresholds(max_quality_drop={"faithfulness": 0.02})
    for mean in (-0.5, 0.0):  # one pair: the "interval" is a single point either way
        v = run(t, quality=(q("faithfulness", mean, mean, mean, n=1),))
        assert v.decision == "hold" and "too few paired values" in v.reasons[0], v
    assert run(t, quality=(q("faithfulness", -0.5, -0.5, -0.5, n=10),)).decision == "reject"


@pytest.mark.parametrize(("top1", "ks"), [(0.07, 0.9), (0.07, None), (None, 0.9), (0.49, 0.1)])
def test_a_big_retrieval_change_without_a_retrieval_quality_measure_holds(top1, ks):
    """The demo's `returns` stratum: faithfulness passes, but top-1 agreement is 7% and the scores moved (KS D
    0.90): nothing says the new chunks are better, so the verdict is hold, with the reason."""
    t = Thresholds(min_pairs=100, max_quality_drop={"faithfulness": 0.05})
    v = run(t, quality=(q("faithfulness", 0.0, -0.01, 0.01),), top1_rate=top1, score_ks=ks)
    assert v.decision == "hold"
    assert "retrieval changed a lot" in v.reasons[0] and "--golden" in v.reasons[0]
    assert ("top-1 agreement 7%" in v.reasons[0]) is (top1 == 0.07)
    assert ("score KS D 0.90" in v.reasons[0]) is (ks == 0.9)
    assert any(r.startswith("ok faithfulness") for r in v.reasons)


def test_a_big_retrieval_change_judged_by_a_retrieval_measure_may_promote_or_reject():
    changed = {"top1_rate": 0.07, "score_ks": 0.9}
    t = Thresholds(max_quality_drop={"faithfulness": 0.05, "ndcg_at_k": 0.02})
    good = (q("faithfulness", 0.0, -0.01, 0.01), q("ndcg_at_k", 0.2, 0.15, 0.25))
    assert run(t, quality=good, **changed).decision == "promote"
    bad = (q("faithfulness", 0.0, -0.01, 0.01), q("ndcg_at_k", -0.2, -0.25, -0.15))
    assert run(t, quality=bad, **changed).decision == "reject"


def test_a_small_retrieval_change_promotes_on_its_thresholds():
    t = Thresholds(max_quality_drop={"faithfulness": 0.05})
    v = run(t, quality=(q("faithfulness", 0.0, -0.01, 0.01),), top1_rate=0.8, score_ks=0.1)
    assert v.decision == "promote"


def test_a_stratum_where_no_ranking_could_be_compared_is_not_promoted_on_latency_alone():
    """Every pair has an empty list on a side (no top-1 to compare) and no retrieval scores: the change in
    retrieval is unknown, a measure without data, so it holds unless a retrieval-quality measure passed."""
    t = Thresholds(max_latency_p95_delta_ms=10.0, max_error_rate_delta=0.01)
    held = run(t, rankings_compared=False)
    assert held.decision == "hold" and "no pair has a ranking on both sides" in held.reasons[0]
    assert run(t).decision == "promote"
    passed = run(Thresholds(max_quality_drop={"ndcg_at_k": 0.02}), rankings_compared=False,
                 quality=(q("ndcg_at_k", 0.01, -0.01, 0.03),))
    assert passed.decision == "promote"
