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

