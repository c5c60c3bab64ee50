"""The permission-leak rule (docs/leaks.md): known answers for each clause, and count == the leaked list."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ragmon.metrics.permissions import LeakedChunk, LeakRule

RULE = LeakRule.sharing(["public", ""])


def test_another_tenants_chunk_is_a_leak_and_own_shared_untenanted_are_not() -> None:
    ids = ["own", "pub", "none", "theirs", "empty"]
    tenants = ["acme", "public", None, "globex", ""]
    assert RULE.count("acme", ids, tenants) == 1
    assert RULE.leaked("acme", ids, tenants) == [LeakedChunk("theirs", "globex")]


def test_a_query_without_a_user_tenant_is_not_checked() -> None:
    assert not RULE.checkable("")
    assert RULE.count("", ["x"], ["globex"]) == 0 and RULE.leaked(None, ["x"], ["globex"]) == []


def test_a_repeated_chunk_counts_once_and_tenants_compare_exactly() -> None:
    ids, tenants = ["a", "a", "b"], ["Acme", "Acme", "acme "]
    assert RULE.count("acme", ids, tenants) == 2  # 'Acme' and 'acme ' are other tenants than 'acme'
    assert [c.chunk_id for c in RULE.leaked("acme", ids, tenants)] == ["a", "b"]


def test_an_empty_shared_tenant_is_ignored_and_mismatched_lengths_raise() -> None:
    assert RULE.shared_tenants == frozenset({"public"})
    with pytest.raises(ValueError, match="one tenant per chunk"):
        RULE.count("acme", ["a", "b"], ["acme"])


@given(
    user=st.sampled_from(["", "acme", "globex"]),
    chunks=st.lists(st.tuples(st.sampled_from("abcdef"), st.sampled_from(["", "acme", "globex", "public", None])),
                    max_size=12),
)
def test_the_count_is_the_number_of_leaked_chunks(user: str, chunks: list[tuple[str, str | None]]) -> None:
    ids = [c for c, _ in chunks]
    tenants = [t for _, t in chunks]
    leaked = RULE.leaked(user, ids, tenants)
    assert RULE.count(user, ids, tenants) == len(leaked)
    assert all(c.tenant not in ("", user, "public") for c in leaked)
    assert len({c.chunk_id for c in leaked}) == len(leaked)



def test_a_chunk_listed_with_two_owners_leaks_whatever_the_order() -> None:
    """One chunk id, its own tenant at one rank and another tenant at another: a leak (the foreign owner named),
    the same in the order the producer sent and in rank order — ingest counts one, the listing reads the other."""
    for ids, tenants in ((["c1", "c2", "c1"], ["acme", "acme", "globex"]), (["c1", "c2", "c1"], ["globex", "acme", "acme"])):
        assert RULE.count("acme", ids, tenants) == 1
        assert RULE.leaked("acme", ids, tenants) == [LeakedChunk("c1", "globex")]


@given(
    user=st.sampled_from(["acme", "globex"]),
    chunks=st.lists(st.tuples(st.sampled_from("abcd"), st.sampled_from(["acme", "globex", "public", None])),
                    max_size=10),
    order=st.randoms(use_true_random=False),
)
def test_the_verdict_does_not_depend_on_the_order_of_the_ranking(user, chunks, order) -> None:
    shuffled = list(chunks)
    order.shuffle(shuffled)
    one = RULE.leaked(user, [c for c, _ in chunks], [t for _, t in chunks])
    other = RULE.leaked(user, [c for c, _ in shuffled], [t for _, t in shuffled])
    assert sorted(c.chunk_id for c in one) == sorted(c.chunk_id for c in other)
    assert RULE.count(user, [c for c, _ in shuffled], [t for _, t in shuffled]) == len(one)


def test_ingest_counts_what_the_listing_names_for_a_ranking_sent_out_of_rank_order() -> None:
    """Ingest counts on the trace as received; the store keeps the ranking sorted by rank and the listing reads
    that: a chunk listed twice with two owners must not make them disagree ('rule changed since')."""
    import json

    from ragmon.contracts.decode import decode_trace
    from ragmon.store.trace_rows import count_leaks
    from tests.conftest import make_trace

    chunk = {"doc_id": "d", "doc_version": "1", "score": 0.5, "text": "t"}
    doc = make_trace(tenant="acme", retrieved=[{**chunk, "chunk_id": "c1", "rank": 2, "tenant": "globex"},
                                               {**chunk, "chunk_id": "c1", "rank": 1, "tenant": "acme"},
                                               {**chunk, "chunk_id": "c2", "rank": 3, "tenant": "acme"}])
    trace = decode_trace(json.dumps(doc).encode()).trace
    stored = sorted(doc["retrieved"], key=lambda r: r["rank"])
    listed = RULE.leaked("acme", [r["chunk_id"] for r in stored], [r["tenant"] for r in stored])
    assert count_leaks(RULE, trace) == len(listed) == 1
