"""Quote verification in code: does a quoted span really occur in the chunk it cites?

A judge may claim a citation is supported; only this check decides whether the quote is there. Both sides are
normalised the same way before a plain substring test:

* Unicode NFKC (full-width letters, ligatures such as "ﬁ", non-breaking spaces become their plain forms);
* case folded (``str.casefold``: "Straße" matches "STRASSE");
* typographic quotes and apostrophes → ``"`` and ``'``; en/em dashes and minus signs → ``-``;
* soft hyphens and zero-width characters removed;
* every run of whitespace (including line breaks inside the chunk) → one space; leading/trailing space dropped.

A quote may elide text with an ellipsis (``...`` or ``…``): each fragment must then occur, in order, without
overlapping. Punctuation other than the above is kept, so "10%" does not match "10 %" and numbers must match
exactly. Pure functions: no I/O.
"""

from __future__ import annotations

import re
import unicodedata

__all__ = ["normalise_for_quote", "verify_quote"]

_TRANSLATE = str.maketrans(
    {
        "\u2018": "'", "\u2019": "'", "\u201a": "'", "\u201b": "'", "\u2032": "'",
        "\u201c": '"', "\u201d": '"', "\u201e": '"', "\u201f": '"', "\u2033": '"', "\u00ab": '"', "\u00bb": '"',
        "\u2010": "-", "\u2011": "-", "\u2012": "-", "\u2013": "-", "\u2014": "-", "\u2015": "-", "\u2212": "-",
        "\u00ad": None, "\u200b": None, "\u200c": None, "\u200d": None, "\u2060": None, "\ufeff": None,
    }
)  # fmt: skip
_SPACE = re.compile(r"\s+")
_ELLIPSIS = re.compile(r"\s*(?:\.\s*\.\s*\.|\u2026)\s*")


def normalise_for_quote(text: str) -> str:
    """``text`` in the canonical form quotes are compared in (see the module docstring).

    Does NOT catch: paraphrase, reordered words, or transliteration; those are not the same quote.
    """
    text = unicodedata.normalize("NFKC", text).translate(_TRANSLATE).casefold()
    return _SPACE.sub(" ", text).strip()


def verify_quote(quote: str | None, chunk_text: str | None) -> bool:
    """True when the normalised ``quote`` occurs in the normalised ``chunk_text`` (ellipses allowed).

    False for a missing or empty quote (an empty quote proves nothing), a missing chunk text, or a quote made
    only of ellipses. Fragments separated by an ellipsis must appear in order.

    Does NOT catch: a quote that is real but does not support the sentence citing it (that is the judge's
    ``supports``), a trivially short quote ("the") that occurs anywhere, or a quote from a stale document
    version when the stale chunk is the one cited.
    """
    if not quote or chunk_text is None:
        return False
    haystack = normalise_for_quote(chunk_text)
    fragments = [f for f in (normalise_for_quote(p) for p in _ELLIPSIS.split(unicodedata.normalize("NFKC", quote)))
                 if f]
    if not fragments:
        return False
    position = 0
    for fragment in fragments:
        found = haystack.find(fragment, position)
        if found < 0:
            return False
        position = found + len(fragment)
    return True
