"""The permission-leak rule: which retrieved chunks a user was not allowed to see, by chunk tenant vs user tenant.

One rule for the live count on every ingested trace, for ``ragmon leaks list`` and for the release gate, so the
three never disagree about what a leak is (docs/leaks.md):

1. A trace (or golden case) whose user tenant is empty is not checked: there is nothing to compare with.
2. A chunk without a tenant is not counted: it cannot be judged (the producer should label every chunk).
3. A chunk whose tenant is the user's own, or one of the configured shared tenants (public documentation, a
   common knowledge base: ``ingest.shared_tenants``), is allowed.
4. Every other chunk in the ranking before truncation is a leak, each distinct chunk id once. The whole
   ranking counts, not only the context passed to the model: a retriever that returns another tenant's passage
   has already broken the permission filter, whether or not the prompt was cut before it.
5. A chunk id listed more than once with different owners leaks when any of its listings names another
   tenant (the first such tenant is reported): the verdict does not depend on the order of the ranking, so the
   count ingest makes on the trace as received equals what the listing finds on the ranking as stored (sorted
   by rank).

Tenants compare exactly (case-sensitive, no trimming): they are identifiers, and a near-match is a different
tenant. Pure: no I/O, no clock, no globals.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

__all__ = ["LeakRule", "LeakedChunk"]


@dataclass(frozen=True, slots=True)
class LeakedChunk:
    """One chunk a user should not have been shown: its id and owning tenant (never its text)."""

    chunk_id: str
    tenant: str


@dataclass(frozen=True, slots=True)
class LeakRule:
    """The rule above, with the tenants every user may read."""

    shared_tenants: frozenset[str] = frozenset()

    @classmethod
    def sharing(cls, tenants: Iterable[str]) -> LeakRule:
        return cls(frozenset(t for t in tenants if t))

    def checkable(self, user_tenant: str | None) -> bool:
        """Whether a query by ``user_tenant`` can be checked at all (rule 1)."""
        return bool(user_tenant)

    def count(self, user_tenant: str | None, chunk_ids: Sequence[str], tenants: Sequence[str | None]) -> int:
        """Leaked chunks in a ranking: ``chunk_ids`` best first, ``tenants`` each chunk's owner ('' or None: unknown).

        Does NOT catch: leaks through untenanted chunks, leaks in the answer from the model's own memory, or
        scopes finer than a tenant (a document one colleague may read and another may not).
        """
        if not user_tenant:
            return 0
        if len(chunk_ids) != len(tenants):
            raise ValueError(f"expected one tenant per chunk, got {len(tenants)} tenants for {len(chunk_ids)} chunks")
        if all(not t or t == user_tenant for t in tenants):
            return 0  # the common case on the ingest hot path: every chunk is the user's own
        return len(self.leaked(user_tenant, chunk_ids, tenants))

    def leaked(self, user_tenant: str | None, chunk_ids: Sequence[str],
               tenants: Sequence[str | None]) -> list[LeakedChunk]:  # fmt: skip
        """The leaked chunks themselves, each id once, in the order of its first listing (``count`` is their
        number); a chunk listed with several owners leaks when one of them is another tenant (rule 5)."""
        if not user_tenant:
            return []
        order: dict[str, None] = {}
        foreign: dict[str, str] = {}
        for chunk, tenant in zip(chunk_ids, tenants, strict=True):
            order.setdefault(chunk)
            if tenant and tenant != user_tenant and tenant not in self.shared_tenants:
                foreign.setdefault(chunk, tenant)
        return [LeakedChunk(chunk, foreign[chunk]) for chunk in order if chunk in foreign]
