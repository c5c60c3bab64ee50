"""The what-changed decomposition (``ragmon.drift.explain.explain``): known answers by hand, the identity mix + within =
Δ, and the ranking on the shapes of change it must tell apart."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragmon.drift.explain.explain import Moments, SegmentInput, decompose, explain
from ragmon.drift.explain.explain_run import parse_group
from tests.unit.drift.test_purity import test_module_is_pure as _module_is_pure


def _moments(values: list[float]) -> Moments:
    return Moments(len(values), float(sum(values)), float(sum(v * v for v in values)))


def _seg(value: str, ref: list[float], cur: list[float]) -> SegmentInput:
    return SegmentInput(value, _moments(ref), _moments(cur))


def _normal(rng: np.random.Generator, n: int, mean: float, sd: float = 0.05) -> list[float]:
    return list(rng.normal(mean, sd, size=n))


def test_explain_is_pure() -> None:
    _module_is_pure("drift/explain/explain.py")


def test_known_answer_by_hand() -> None:
    # a: 50/50 → 25/75 of the traffic with means 1 → 1 and 0 → 0.5 (b)
    # M0 = 0.5·1 + 0.5·0 = 0.5; M1 = 0.25·1 + 0.75·0.5 = 0.625; Δ = 0.125
    # within = w̄_b·(0.5 − 0) = 0.625·0.5 = 0.3125; mix = Δ − within = −0.1875
    # restore b (w0 0.5, m0 0): M1′ = 0.5·0 + 0.5·1 = 0.5 → explains (0.625 − 0.5)/0.125 = 100 %
    segs = [_seg("a", [1.0] * 50, [1.0] * 25), _seg("b", [0.0] * 50, [0.5] * 75)]
    d = decompose("dim", "", segs, np.random.default_rng(0), draws=0)
    assert d.delta == pytest.approx(0.125)
    assert d.within.estimate == pytest.approx(0.3125)
    assert d.mix.estimate == pytest.approx(-0.1875)
    b = next(s for s in d.segments if s.value == "b")
    assert b.explained.estimate == pytest.approx(1.0)
    assert b.excess.estimate == pytest.approx(0.5)
    a = next(s for s in d.segments if s.value == "a")
    # restore a (w0 0.5, m0 1): M1′ = 0.5·1 + 0.5·0.5 = 0.75 → (0.625 − 0.75)/0.125 = −100 %
    assert a.explained.estimate == pytest.approx(-1.0)


_segment = st.tuples(st.integers(0, 50), st.floats(-5, 5), st.integers(0, 50), st.floats(-5, 5))


@settings(max_examples=200, deadline=None)
@given(st.lists(_segment, min_size=1, max_size=8))
def test_mix_plus_within_is_delta(raw: list[tuple[int, float, int, float]]) -> None:
    segs = [SegmentInput(f"s{i}", Moments(n0, n0 * m0, n0 * m0 * m0), Moments(n1, n1 * m1, n1 * m1 * m1))
            for i, (n0, m0, n1, m1) in enumerate(raw)]
    if not sum(s.reference.n for s in segs) or not sum(s.current.n for s in segs):
        return
    d = decompose("dim", "", segs, np.random.default_rng(0), draws=0)
    m0 = sum(s.reference.total for s in segs) / sum(s.reference.n for s in segs)
    m1 = sum(s.current.total for s in segs) / sum(s.current.n for s in segs)
    assert d.delta == pytest.approx(m1 - m0, abs=1e-9)
    assert d.mix.estimate + d.within.estimate == pytest.approx(d.delta, abs=1e-9)


def test_a_new_segment_carries_the_change_and_ranks_first() -> None:
    rng = np.random.default_rng(1)
    # index: a stale version appears in 30 % of the current traffic, 0.1 lower; tenant: unrelated, spread evenly
    index = [_seg("v41", _normal(rng, 2000, 0.6), _normal(rng, 700, 0.6)), _seg("v37", [], _normal(rng, 300, 0.5))]
    cur_tenant = list(rng.permutation([*_normal(rng, 700, 0.6), *_normal(rng, 300, 0.5)]))
    ref_tenant = _normal(rng, 2000, 0.6)
    tenant = [_seg("acme", ref_tenant[:1200], cur_tenant[:600]), _seg("hooli", ref_tenant[1200:], cur_tenant[600:])]
    total_ref, total_cur = _moments(ref_tenant), _moments(cur_tenant)
    e = explain("top1_score", [("tenant", "", tenant), ("index_version", "", index),
                               ("model", "", [_seg("m@1", ref_tenant, cur_tenant)])],
                total_ref, total_cur, np.random.default_rng(2))
    assert [d.dimension for d in e.dimensions][0] == "index_version"
    top = e.dimensions[0].top
    assert top is not None and top.value == "v37"
    assert top.explained.low > 0.7 and top.excess.estimate > 0.7
    tenant_result = next(d for d in e.dimensions if d.dimension == "tenant")
    assert tenant_result.score < 0.2  # spread evenly: no tenant explains more than its weight
    assert e.dimensions[-1].dimension == "model" and e.dimensions[-1].score == -math.inf  # one value: says nothing
    assert e.delta.high < 0  # the drop is real


def test_the_same_segment_got_worse_is_within() -> None:
    rng = np.random.default_rng(3)
    segs = [_seg("kb", _normal(rng, 1000, 0.6), _normal(rng, 1000, 0.45)),
            _seg("wiki", _normal(rng, 1000, 0.6), _normal(rng, 1000, 0.6))]
    d = decompose("source", "", segs, np.random.default_rng(4))
    assert d.within.estimate == pytest.approx(d.delta, abs=0.01) and abs(d.mix.estimate) < 0.01
    assert d.top is not None and d.top.value == "kb" and d.top.excess.low > 0.3


def test_parse_group() -> None:
    g = parse_group("hybrid@v1/production/billing/eu")
    assert (g.retriever_name, g.retriever_version, g.variant, g.stratum) == ("hybrid", "v1", "production", "billing/eu")
    for bad in ("hybrid/production/billing", "hybrid@v1/production", "@v1/p/s", "hybrid@/p/s"):
        with pytest.raises(ValueError, match="retriever@version/variant/stratum"):
            parse_group(bad)


def test_a_change_spread_evenly_stands_out_nowhere() -> None:
    rng = np.random.default_rng(6)
    ref, cur = _normal(rng, 2000, 0.6), _normal(rng, 1000, 0.55)
    dims = [(name, "", [_seg(f"{name}{k}", ref[k::4], cur[k::4]) for k in range(4)]) for name in ("tenant", "source")]
    e = explain("top1_score", dims, _moments(ref), _moments(cur), np.random.default_rng(7))
    assert e.delta.high < 0  # a real drop …
    assert not e.stands_out and all(d.score < 0.2 for d in e.dimensions)  # … that no segment of them holds
