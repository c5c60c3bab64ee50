"""What the heuristic judge reads from one chunk — its sentences and their content words — computed once per text.

In production the same popular chunks come back in trace after trace; splitting and normalizing a chunk's text
sentence by sentence was most of the heuristic judge's time. ``ChunkProfile`` holds that work for one text, and
``ChunkProfiles`` is a bounded least-recently-used cache of profiles keyed by the text itself (a dict lookup hashes
the text and compares it in full, so two different chunks can never share a profile, whatever their ids).

Everything here is a pure function of the text: a cached profile gives exactly the verdicts a fresh one would.
No I/O, no clock. Thread-safe: the cache is ``functools.lru_cache`` (which locks internally), and a profile's
mutable parts, the sentences split on first use and the memo of evidence checks, are written with whole values
(two threads racing compute the same answer twice).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache

from ragmon.judge.text import content_term_set, content_terms, evidence_holds, sentences

#: chunks cached by default; at ~1,000 characters a chunk's profile is ~3 KB, so ~60 MB when full
DEFAULT_MAX_ENTRIES = 4_096
#: longer texts are profiled every time instead of cached, so one huge chunk cannot pin megabytes in the cache
MAX_CACHED_CHARS = 32_000


class ChunkProfile:
    """One chunk text's content words, and (computed on first use) its sentences with their content-word sets.

    Every chunk of a trace needs its words (a claim or the question is matched against each chunk), but only the
    chunk that best matches a claim, or a cited one, needs its sentences: splitting waits until then.
    """

    __slots__ = ("_evidence", "_sentences", "terms", "text")

    def __init__(self, text: str):
        self.text = text
        self.terms = _terms_of(text)
        self._sentences: tuple[tuple[str, frozenset[str]], ...] | None = None
        self._evidence: dict[int, bool] = {}

    @property
    def sentences(self) -> tuple[tuple[str, frozenset[str]], ...]:
        found = self._sentences
        if found is None:
            found = self._sentences = tuple((s, content_term_set(s)) for s in sentences(self.text))
        return found

    def best_sentence(self, plain: frozenset[str] | set[str]) -> int | None:
        """Index of the first sentence sharing the most of ``plain`` (a claim's words, negation dropped); None
        when it shares none. The judge compares coverage, ``shared / len(plain)``: the same order as ``shared``."""
        if not plain:
            return None
        best, best_shared = None, 0
        for i, (_, terms) in enumerate(self.sentences):
            shared = len(plain & terms)
            if shared > best_shared:
                best, best_shared = i, shared
        return best

    def evidence_holds(self, index: int) -> bool:
        """``evidence_holds(sentence, text)`` for one of this chunk's own sentences, checked once."""
        found = self._evidence.get(index)
        if found is None:
            found = self._evidence[index] = evidence_holds(self.sentences[index][0], self.text)
        return found


def _terms_of(text: str) -> frozenset[str]:
    """The union of the content words of ``text``'s sentences.

    For ASCII text that is the content words of the whole text read at once: a sentence boundary always holds
    whitespace, which no word contains, and the only other characters a boundary removes (closing quotes and
    brackets after . ! ?) never sit inside a word either. Other text goes sentence by sentence, as it always
    did, rather than trusting Unicode normalization to behave the same on the whole as on the parts.
    """
    if text.isascii():
        return content_term_set(text)
    return frozenset().union(*(content_terms(s) for s in sentences(text)))


class ChunkProfiles:
    """A bounded LRU cache of ``ChunkProfile`` keyed by chunk text. ``max_entries`` 0 disables caching."""

    def __init__(self, max_entries: int = DEFAULT_MAX_ENTRIES):
        if max_entries < 0:
            raise ValueError(f"max_entries must be >= 0, got {max_entries}")
        self.max_entries = max_entries
        self._cached: Callable[[str], ChunkProfile] = lru_cache(maxsize=max_entries)(ChunkProfile)

    def get(self, text: str) -> ChunkProfile:
        if self.max_entries == 0 or len(text) > MAX_CACHED_CHARS:
            return ChunkProfile(text)
        return self._cached(text)

    def stats(self) -> tuple[int, int, int]:
        """(hits, misses, entries) so far."""
        info = self._cached.cache_info()  # type: ignore[attr-defined]
        return info.hits, info.misses, info.currsize
