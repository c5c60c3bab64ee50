"""Shadow comparison end to end on chDB with generated production/shadow traffic and a known injected
difference: the candidate loses on 'billing' and wins on 'consent'; the other strata are equal."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from ragmon.contracts.golden import GoldenSet
from ragmon.demo.traffic import RetrieverProfile, generate_golden, generate_traces, relevance_of
from ragmon.metrics.retrieval import recall_at_k
from ragmon.shadow import agreement, pairs, queries
from ragmon.shadow.compare import CompareOptions, compare
from ragmon.shadow.pairs import RetrieverRef
from ragmon.shadow.verdict import Thresholds
from tests.conftest import make_trace as mk

from .support import insert_scores, insert_traces

N = 1200
SEED = 11
BASE = RetrieverRef("hybrid", "v1", "production")
CAND = RetrieverRef("dense", "v2", "shadow")
CANDIDATE = RetrieverProfile(name="dense", version="v2", stratum_noise={"billing": 1.4, "consent": 0.12},
                             latency_ms_median=60.0, error_rate=0.02)


def window() -> tuple[datetime, datetime]:
    now = datetime.now(UTC)
    return now - timedelta(days=1), now + timedelta(minutes=5)


def options(**kw) -> CompareOptions:
    since, until = window()
    base = {"baseline": BASE, "candidate": CAND, "since": since, "until": until, "n_resamples": 500}
    base.update(kw)
    return CompareOptions(**base)


@pytest.fixture
def traffic(store):
    docs = generate_traces(N, seed=SEED, candidate=CANDIDATE, coverage=0.9, candidate_only=12)
    insert_traces(store, docs)
    return docs


def test_known_difference_gives_per_stratum_verdicts(store, traffic):
    golden = GoldenSet.validate_python(generate_golden(N, seed=SEED, every=3))
    result = compare(store, options(golden=golden, thresholds=Thresholds(
        min_pairs=50, max_quality_drop={"ndcg_at_k": 0.02})))
    verdicts = {s.stratum: s.verdict.decision for s in result.strata}
    assert verdicts["billing"] == "reject"
    assert verdicts["consent"] == "promote"
    assert verdicts["shipping"] != "reject" and verdicts["returns"] != "reject"
    assert result.verdict.decision == "reject" and result.exit_code == 1
    assert "billing" in result.verdict.reasons[0]

    ndcg = {s.stratum: next(q.result for q in s.quality if q.metric == "ndcg_at_k") for s in result.strata}
    assert ndcg["billing"].ci_high < 0 < ndcg["consent"].ci_low
    assert ndcg["billing"].sign_test.losses > ndcg["billing"].sign_test.wins
    assert ndcg["billing"].sign_test.p_value < 0.01

    # unpaired counts are exactly what the generator made
    prod = {d["query_id"] for d in traffic if d["retriever"]["variant"] == "production"}
    shadow = {d["query_id"] for d in traffic if d["retriever"]["variant"] == "shadow"}
    assert result.overall.pairs == len(prod & shadow)
    assert result.overall.baseline_only == len(prod - shadow)
    assert result.overall.candidate_only == len(shadow - prod) == 12
    assert (result.baseline_traces, result.candidate_traces) == (N, len(shadow))

    # the biggest losses are billing queries and the biggest gains mostly consent ones, lists side by side
    ex = result.examples
    assert ex.kind == "quality" and ex.metric == "ndcg_at_k"
    assert ex.losses and ex.gains
    assert all(e.difference < 0 for e in ex.losses) and all(e.difference > 0 for e in ex.gains)
    assert sum(e.stratum == "billing" for e in ex.losses) >= 3
    assert all(e.question and len(e.baseline_top_k) == 10 and len(e.candidate_top_k) in (0, 10) for e in ex.losses)

    # operational deltas reflect the injected slower, error-prone candidate
    ops = result.overall.operational
    assert ops.candidate.latency_ms[0] > ops.baseline.latency_ms[0] * 1.3
    assert 0.005 < ops.candidate.error_rate < 0.05 and ops.baseline.error_rate == 0.0


def test_sql_agreement_and_latency_match_python(store, traffic):
    since, until = window()
    params = pairs.parameters(BASE, CAND, since, until, k=7, p=0.8)
    rows = store.query_rows(queries.pairs_sql(store.table("traces")), params)
    by_q: dict[str, dict[str, dict]] = {}
    for d in traffic:
        by_q.setdefault(d["query_id"], {})[d["retriever"]["variant"]] = d
    assert len(rows) == sum(len(v) == 2 for v in by_q.values())
    for row in rows:
        b = [r["chunk_id"] for r in by_q[row["query_id"]]["production"]["retrieved"]]
        c = [r["chunk_id"] for r in by_q[row["query_id"]]["shadow"]["retrieved"]]
        assert row["jaccard"] == pytest.approx(agreement.jaccard_at_k(b, c, 7))
        assert row["rbo"] == pytest.approx(agreement.rank_biased_overlap(b, c, 7, 0.8))
        top1 = agreement.top1_agreement(b, c)
        assert row["top1"] == (None if top1 is None else float(top1))
        tau = agreement.kendall_tau_shared(b, c, 7)
        assert (row["tau"] is None) == (tau is None)
        if tau is not None:
            assert row["tau"] == pytest.approx(tau)

    result = compare(store, options(k=7, rbo_p=0.8))
    paired = [v for v in by_q.values() if len(v) == 2]
    lat = np.sort([v["production"]["latency_ms"]["retrieve"] for v in paired])
    expected = [lat[min(len(lat) - 1, int(math.floor(q * len(lat))))] for q in (0.5, 0.95, 0.99)]
    assert result.overall.operational.baseline.latency_ms == pytest.approx(expected)
    errors = sum(bool(v["shadow"]["error"]) for v in paired)
    assert result.overall.operational.candidate.error_rate == pytest.approx(errors / len(paired))
    jac = [agreement.jaccard_at_k([r["chunk_id"] for r in v["production"]["retrieved"]],
                                  [r["chunk_id"] for r in v["shadow"]["retrieved"]], 7) for v in paired]
    assert result.overall.agreement.mean_overlap == pytest.approx(float(np.mean(jac)))


def test_edge_lists_agree_between_sql_and_python(store):
    def chunks(ids):
        return [{"chunk_id": c, "score": 1.0 / (i + 1), "rank": i + 1} for i, c in enumerate(ids)]

    cases = {"dup": (["a", "a", "b", "c"], ["b", "a", "a"]), "empty": ([], []), "one-empty": (["a"], []),
             "short": (["a", "b"], ["b", "a", "x", "y", "z"]), "same": (["a", "b", "c"], ["a", "b", "c"])}
    docs = []
    for name, (b, c) in cases.items():
        docs.append(mk(query_id=name, retrieved=chunks(b)))
        docs.append(mk(query_id=name, retrieved=chunks(c),
                       retriever={"name": "dense", "version": "v2", "variant": "shadow"}))
    insert_traces(store, docs)
    since, until = window()
    rows = store.query_rows(queries.pairs_sql(store.table("traces")),
                            pairs.parameters(RetrieverRef("hybrid", "", "production"), CAND, since, until, k=3))
    got = {r["query_id"]: r for r in rows}
    assert set(got) == set(cases)
    for name, (b, c) in cases.items():
        r = got[name]
        assert r["jaccard"] == pytest.approx(agreement.jaccard_at_k(b, c, 3)), name
        assert r["rbo"] == pytest.approx(agreement.rank_biased_overlap(b, c, 3)), name
        top1 = agreement.top1_agreement(b, c)
        assert r["top1"] == (None if top1 is None else float(top1)), name
        tau = agreement.kendall_tau_shared(b, c, 3)
        assert r["tau"] == (None if tau is None else pytest.approx(tau)), name


def test_judge_quality_deltas_per_fingerprint_and_missing_scores(store, traffic):
    rel = relevance_of(N, seed=SEED)
    rows = []
    for d in traffic:
        if d["query_id"] not in rel or int(d["query_id"][-2:], 16) % 3:
            continue  # a third of the queries is judged (the sampler picks by query_id, so both twins)
        value = recall_at_k([r["chunk_id"] for r in d["retrieved"]], rel[d["query_id"]], 5) or 0.0
        rows.append((d, "context_recall", value, "fp-A"))
    # 'faithfulness' only on the baseline side, 'relevance' with a different judge on each side
    for d in traffic[:200]:
        if d["retriever"]["variant"] == "production":
            rows.append((d, "faithfulness", 0.9, "fp-A"))
        rows.append((d, "relevance", 0.5, "fp-A" if d["retriever"]["variant"] == "production" else "fp-B"))
    insert_scores(store, rows)
    result = compare(store, options(thresholds=Thresholds(max_quality_drop={"context_recall": 0.02,
                                                                            "faithfulness": 0.05})))
    by = {s.stratum: {q.metric: q for q in s.quality} for s in [*result.strata, result.overall]}
    assert by["billing"]["context_recall"].result.ci_high < 0
    assert by["consent"]["context_recall"].result.ci_low > 0
    assert by["billing"]["context_recall"].judge_fingerprint == "fp-A"
    assert "faithfulness" not in by["all"] and "relevance" not in by["all"]
    text = "\n".join(result.notices)
    assert "faithfulness" in text and "on the baseline only" in text
    assert "relevance" in text and "different judge fingerprints" in text and "fp-A vs fp-B" in text
    verdicts = {s.stratum: s.verdict for s in result.strata}
    assert verdicts["billing"].decision == "reject"
    assert verdicts["consent"].decision == "hold"  # context_recall passes, faithfulness has no paired values
    assert any("faithfulness" in r for r in verdicts["consent"].reasons)
    assert result.examples.kind == "quality" and result.examples.metric == "context_recall"


def test_no_pairs_is_explained(store):
    prod_only = generate_traces(50, seed=1)
    insert_traces(store, prod_only)
    result = compare(store, options(thresholds=Thresholds(min_overlap=0.5)))
    assert result.pairs == 0 and result.verdict.decision == "hold" and result.exit_code == 4
    note = result.notices[0]
    assert "no pairs" in note and "candidate dense@v2 (shadow)" in note and "hybrid@v1 (production) 50" in note
    assert result.examples.kind == "none"

    other = generate_traces(30, seed=2, candidate=RetrieverProfile(name="dense", version="v2"))
    for d in other:
        if d["retriever"]["variant"] == "shadow":
            d["query_id"] += "-mismatch"
    insert_traces(store, [d for d in other if d["retriever"]["variant"] == "shadow"])
    result = compare(store, options())
    assert result.pairs == 0 and "no query_id is shared" in result.notices[0]


def test_different_k_is_reported(store):
    docs = generate_traces(200, seed=4, candidate=RetrieverProfile(name="dense", version="v2", k=5))
    insert_traces(store, docs)
    result = compare(store, options())
    assert result.k == 5
    text = "\n".join(result.notices)
    assert "parameters.k [10]" in text and "[5]" in text
    assert "usually returns 10 results and the candidate 5; compared at k=5" in text
    forced = compare(store, options(k=10))
    assert forced.k == 10
    assert any("candidate usually returns 5 results, fewer than --k 10" in n for n in forced.notices)
    assert forced.overall.operational.candidate.short_lists == forced.pairs


def test_missing_judge_scores_and_no_thresholds(store, traffic):
    result = compare(store, options(thresholds=Thresholds(max_quality_drop={"faithfulness": 0.02})))
    assert all(s.verdict.decision == "hold" for s in result.strata)
    assert any("no quality data" in n for n in result.notices)
    assert result.examples.kind == "disagreement" and len(result.examples.losses) == 5
    plain = compare(store, options())
    assert plain.verdict.decision == "hold" and plain.exit_code == 4
    assert all("no thresholds given" in s.verdict.reasons[0] for s in plain.strata)


def test_contradictory_options_are_input_errors(store):
    from ragmon.errors import InputError

    since, until = window()
    with pytest.raises(InputError, match="both select"):
        compare(store, options(candidate=BASE))
    with pytest.raises(InputError, match="not before"):
        compare(store, options(since=until, until=since))
    with pytest.raises(InputError, match="NAME@VERSION"):
        RetrieverRef.parse("a@b@c", "shadow")


@pytest.mark.parametrize("k", [1, 3, 10])
def test_random_lists_agree_between_sql_and_python(store, k):
    """Seeded fuzz: short alphabets (many duplicates and shared items), lengths 0–12, several k."""
    import random

    rng = random.Random(k)

    def chunks(ids):
        return [{"chunk_id": c, "score": 1.0 / (i + 1), "rank": i + 1} for i, c in enumerate(ids)]

    lists = {}
    docs = []
    for i in range(300):
        alphabet = [f"c{j}" for j in range(rng.randint(1, 15))]
        b = [rng.choice(alphabet) for _ in range(rng.randint(0, 12))]
        c = [rng.choice(alphabet) for _ in range(rng.randint(0, 12))]
        lists[f"f{i}"] = (b, c)
        docs.append(mk(query_id=f"f{i}", retrieved=chunks(b)))
        docs.append(mk(query_id=f"f{i}", retrieved=chunks(c),
                       retriever={"name": "dense", "version": "v2", "variant": "shadow"}))
    insert_traces(store, docs)
    since, until = window()
    rows = store.query_rows(queries.pairs_sql(store.table("traces")), pairs.parameters(
        RetrieverRef("hybrid", "", "production"), CAND, since, until, k=k, p=0.7))
    assert len(rows) == 300
    for r in rows:
        b, c = lists[r["query_id"]]
        assert r["jaccard"] == pytest.approx(agreement.jaccard_at_k(b, c, k))
        assert r["rbo"] == pytest.approx(agreement.rank_biased_overlap(b, c, k, 0.7))
        tau = agreement.kendall_tau_shared(b, c, k)
        assert r["tau"] == (None if tau is None else pytest.approx(tau))
        top1 = agreement.top1_agreement(b, c)
        assert r["top1"] == (None if top1 is None else float(top1))
