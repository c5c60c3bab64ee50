"""The gate's permission-leak check: what it needs from the retriever, the sign-off that lets a leak pass, and the
artifact's record of both.

A golden case with a ``tenant`` is asked on behalf of a user of that tenant: the retriever is called with
``tenant=`` when its signature takes it, every such case is checked (answerable or not: a question that must be
refused is exactly where another tenant's passage must not come back), and each chunk's tenant comes from the
retriever's output (``{"chunk_id", "score", "tenant"}`` items) or from ``chunk_tenant(chunk_id)`` in its module.
The rule is ``ragmon.metrics.permissions`` with ``ingest.shared_tenants``, as live traffic is counted.

Any leak in any stratum fails the gate unless ``--allow-leaks "reason, named approver"`` is given
(:func:`parse_approval`, strict about what it accepts: it is pasted into an immutable audit record). This
module checks and records; the runner calls the retriever, the report gates.
"""

from __future__ import annotations

import inspect
import re
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from ragmon.errors import InputError
from ragmon.metrics.permissions import LeakedChunk, LeakRule

ChunkTenant = Callable[[str], Any]
MAX_APPROVAL_CHARS = 500
MAX_APPROVER_CHARS = 100
#: an approver is a name or an address: letters (any script), digits, spaces and . ' @ - _ +
_APPROVER = re.compile(r"[\w .'@+-]+")
_NOT_A_NAME = frozenset({"tbd", "todo", "n/a", "na", "none", "nobody", "noone", "no one", "me", "myself", "someone",
                         "anyone", "unknown", "approver", "named approver", "x", "-", "?"})  # fmt: skip


class TenantLookupError(ValueError):
    """``chunk_tenant`` failed or returned something that is not a tenant (the case is recorded as an error)."""


@dataclass(frozen=True, slots=True)
class LeakApproval:
    """A named person's sign-off for shipping despite permission leaks, recorded in the run artifact."""

    reason: str
    approver: str

    def as_dict(self) -> dict[str, str]:
        return {"reason": self.reason, "approver": self.approver}


@dataclass(frozen=True, slots=True)
class LeakCheck:
    """What the runner needs to check a tenant's case: the rule, whether the retriever takes ``tenant=``, and the
    module's ``chunk_tenant`` lookup when it has one."""

    rule: LeakRule
    passes_tenant: bool
    chunk_tenant: ChunkTenant | None

    @classmethod
    def for_retriever(cls, retriever: Callable[..., Any], module: ModuleType | None, rule: LeakRule) -> LeakCheck:
        lookup = getattr(module, "chunk_tenant", None) if module is not None else None
        return cls(rule, _takes_tenant(retriever), lookup if callable(lookup) else None)

    def tenants(self, ids: Sequence[str], returned: Sequence[str | None]) -> list[str | None]:
        """Each chunk's tenant: the one the retriever returned, else ``chunk_tenant(id)``; ``TenantLookupError`` when
        the lookup fails or returns something that is not a tenant name (the case is then recorded as an error)."""
        out = []
        for chunk, tenant in zip(ids, returned, strict=True):
            if tenant is None and self.chunk_tenant is not None:
                try:
                    tenant = self.chunk_tenant(chunk)
                except Exception as exc:  # noqa: BLE001 - user code: one bad lookup must not stop the run
                    raise TenantLookupError(f"chunk_tenant({chunk!r}) raised {type(exc).__name__}: {exc}") from None
                if tenant is not None and not isinstance(tenant, str):
                    raise TenantLookupError(f"chunk_tenant({chunk!r}) returned {type(tenant).__name__}; expected a str "
                                            "or None")
            out.append(tenant or None)
        return out

    def leaked(self, user_tenant: str, ids: Sequence[str], tenants: Sequence[str | None]) -> tuple[LeakedChunk, ...]:
        return tuple(self.rule.leaked(user_tenant, ids, tenants))


def _takes_tenant(function: Callable[..., Any]) -> bool:
    try:
        params = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):  # builtins and some C callables have no signature: call them plainly
        return False
    return any(p.name == "tenant" and p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD) for p in params)


def parse_approval(text: str) -> LeakApproval:
    """``"reason, named approver"`` → the approval; ``InputError`` saying what is wrong with anything else.

    The approver is what follows the last comma, the reason what precedes it. Refused: control and format
    characters anywhere (newlines, ANSI escapes, bidirectional overrides: they would forge or hide text in logs
    and the artifact), an empty reason, an approver that is not a name (placeholders like 'TBD' or 'me',
    markup, punctuation), and overlong values.
    """
    option = "--allow-leaks"
    if any(unicodedata.category(ch) in ("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp") for ch in text):
        raise InputError(f"{option}: control or invisible characters are not allowed; write the reason and the "
                         "approver's name as plain text: --allow-leaks \"reason, Jane Doe\"")  # fmt: skip
    if len(text) > MAX_APPROVAL_CHARS:
        raise InputError(f"{option}: at most {MAX_APPROVAL_CHARS} characters, got {len(text)}; link a ticket in the "
                         "reason instead of pasting it")  # fmt: skip
    reason, comma, approver = text.rpartition(",")
    reason, approver = " ".join(reason.split()), " ".join(approver.split())
    if not comma or not reason or not approver:
        raise InputError(f"{option} {text!r}: expected \"reason, named approver\", e.g. --allow-leaks \"shared "
                         "glossary mislabelled, fix in INC-42, Jane Doe\"")  # fmt: skip
    if (len(approver) > MAX_APPROVER_CHARS or not _APPROVER.fullmatch(approver)
            or not any(ch.isalpha() for ch in approver) or approver.casefold() in _NOT_A_NAME):  # fmt: skip
        raise InputError(f"{option}: {approver!r} is not a named approver; give the person's name or address "
                         "after the last comma (letters, digits, spaces and . ' @ - _ +)")  # fmt: skip
    return LeakApproval(reason, approver)


def leak_section(runs: Sequence[Any], approval: LeakApproval | None) -> dict[str, Any]:
    """The artifact's ``leaks`` record: cases checked, leaked chunks per stratum, and who let them pass."""
    per_stratum: dict[str, int] = {}
    for run in runs:
        if run.leaks:
            per_stratum[run.category] = per_stratum.get(run.category, 0) + len(run.leaks)
    total = sum(per_stratum.values())
    return {
        "checked_cases": sum(1 for r in runs if r.leak_checked),
        "leaked_chunks": total,
        "per_stratum": dict(sorted(per_stratum.items())),
        "approval": approval.as_dict() if approval is not None else None,
        "passed": total == 0 or approval is not None,
    }
