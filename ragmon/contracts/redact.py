"""Redaction of configured trace fields before storage and before a judge sees them (e-mail addresses, phone
numbers, …).

Owns: compiling the named patterns of ``ingest.redact_patterns`` (applied in order), replacing each match in the
fields named by ``ingest.redact_fields`` and in the values of the ``attributes`` keys named by
``ingest.redact_attributes`` with ``[REDACTED:<name>]``, and counting matches per pattern. Ingest applies it
before storage, the live scorer before the judge (it reads the traces topic, not the store). It must not do I/O or
touch anything but the listed fields. A trace without a match is returned as is (the common case costs one regex
scan per field).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence

import msgspec

from ragmon.contracts.decode import FastTrace

FIELDS = ("question", "answer", "retrieved_text", "quotes", "error", "feedback_comment")


_DIGIT = re.compile(r"\d").search


def _has_digit(text: str) -> bool:
    r"""``re.search(r"\d", text)`` for any text, ~6× faster on ASCII text (ten substring searches at C speed
    instead of the regex engine stepping through every character: ~0.6 µs against ~4 µs for 300 characters)."""
    if text.isascii():
        for digit in "0123456789":
            if digit in text:
                return True
        return False
    return _DIGIT(text) is not None  # other Unicode digits also match \d


def _prefilter(pattern: str):
    """A cheap necessary condition for ``pattern`` to match (a literal it requires, or a digit), else None.

    Python's ``re`` cannot skip ahead to a literal in the middle of a pattern, so an e-mail pattern costs a
    scan from every position; ``'@' in text`` rules most texts out first at C speed.
    """
    try:
        from re import _parser  # type: ignore[attr-defined]

        items = list(_parser.parse(pattern))
        flags = re.compile(pattern).flags
    except Exception:  # noqa: BLE001 - no prefilter, still correct
        return None
    literals = [chr(arg) for op, arg in items if str(op) == "LITERAL"]
    if literals and not flags & re.IGNORECASE:  # a literal of '(?i)password' may be written 'PASSWORD'
        needle = max(literals, key=len)
        return lambda text: needle in text
    if any(str(op) == "IN" and any(str(a) == "CATEGORY_DIGIT" for _, a in arg) for op, arg in items):
        return _has_digit
    return None


class Redactor:
    """Applies named patterns to the configured fields of a trace. Not thread-safe (counts)."""

    def __init__(self, patterns: Mapping[str, str], fields: Sequence[str], attributes: Sequence[str] = ()):
        unknown = [f for f in fields if f not in FIELDS]
        if unknown:
            raise ValueError(f"unknown redact field(s) {unknown}; expected some of {list(FIELDS)}")
        self.fields = frozenset(fields)
        self.attributes = frozenset(attributes)
        self.counts: Counter[str] = Counter()
        self._rules = [(name, re.compile(p), _prefilter(p), f"[REDACTED:{name}]") for name, p in patterns.items()]
        self._active = bool(self._rules)

    def text(self, value: str) -> str:
        """Redact one string (returns the same object when nothing matched)."""
        if not value:
            return value
        for name, rx, pre, marker in self._rules:
            if (pre is None or pre(value)) and rx.search(value) is not None:
                value, n = rx.subn(marker, value)
                self.counts[name] += n
        return value

    def trace(self, t: FastTrace) -> FastTrace:
        """Return ``t`` with every configured field redacted (``t`` itself when nothing matched)."""
        if not self._active or not (self.fields or self.attributes):
            return t
        changes: dict[str, object] = {}
        f = self.fields
        if "question" in f and (q := self.text(t.question)) is not t.question:
            changes["question"] = q
        if "answer" in f and (a := self.text(t.answer)) is not t.answer:
            changes["answer"] = a
        if "error" in f and (e := self.text(t.error)) is not t.error:
            changes["error"] = e
        if "retrieved_text" in f and t.retrieved:
            chunks = [c if not c.text or (x := self.text(c.text)) is c.text else msgspec.structs.replace(c, text=x)
                      for c in t.retrieved]
            if any(a is not b for a, b in zip(chunks, t.retrieved, strict=True)):
                changes["retrieved"] = chunks
        if "quotes" in f and t.citations:
            cites = [c if not c.quote or (x := self.text(c.quote)) is c.quote else msgspec.structs.replace(c, quote=x)
                     for c in t.citations]
            if any(a is not b for a, b in zip(cites, t.citations, strict=True)):
                changes["citations"] = cites
        if "feedback_comment" in f and t.feedback is not None and t.feedback.comment:
            c = self.text(t.feedback.comment)
            if c is not t.feedback.comment:
                changes["feedback"] = msgspec.structs.replace(t.feedback, comment=c)
        if self.attributes and t.attributes and not self.attributes.isdisjoint(t.attributes):
            attrs = {k: self.text(v) if k in self.attributes else v for k, v in t.attributes.items()}
            if any(attrs[k] is not t.attributes[k] for k in self.attributes.intersection(attrs)):
                changes["attributes"] = attrs
        return msgspec.structs.replace(t, **changes) if changes else t

    def take_counts(self) -> dict[str, int]:
        """Counts since the last call (for the metrics), then reset."""
        out = dict(self.counts)
        self.counts.clear()
        return out
