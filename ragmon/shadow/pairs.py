"""Which traces form one side of a shadow comparison (``RetrieverRef``), and the query parameters every shadow
query takes (``parameters``). The SQL that pairs the two sides is ``queries``. Must not run a query.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ragmon.errors import InputError

_REF = re.compile(r"^(?P<name>[^@\s]{1,256})(?:@(?P<version>[^@\s]{0,256}))?$")


@dataclass(frozen=True, slots=True)
class RetrieverRef:
    """Which traces form one side: retriever name, optional version ('' = any) and variant."""

    name: str
    version: str
    variant: str

    @classmethod
    def parse(cls, text: str, variant: str, *, option: str = "--baseline") -> RetrieverRef:
        match = _REF.match(text.strip())
        if not match:
            raise InputError(f"{option} {text!r} is not NAME or NAME@VERSION (e.g. hybrid@v3)")
        if variant not in ("production", "shadow", "canary"):
            raise InputError(f"variant {variant!r} for {option} must be production, shadow or canary")
        return cls(match["name"], match["version"] or "", variant)

    @property
    def label(self) -> str:
        return f"{self.name}@{self.version}" if self.version else self.name

    def __str__(self) -> str:
        return f"{self.label} ({self.variant})"


def parameters(baseline: RetrieverRef, candidate: RetrieverRef, since: datetime, until: datetime, *,
               k: int = 10, p: float = 0.9, seed: int = 0, stage: str = "retrieve") -> dict[str, Any]:
    """The ``{name:Type}`` values of the shadow queries: both sides, the window, depth ``k``, RBO's ``p``, the
    sample seed and the latency stage."""
    return {
        "b_name": baseline.name, "b_version": baseline.version, "b_variant": baseline.variant,
        "c_name": candidate.name, "c_version": candidate.version, "c_variant": candidate.variant,
        "since": since, "until": until, "k": k, "p": p, "seed": seed, "stage": stage,
    }
