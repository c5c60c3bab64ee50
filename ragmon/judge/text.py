"""Text handling every judge shares: sentence splitting, content words, and judge-evidence verification.

Evidence a judge quotes is checked with the metrics library's ``verify_quote`` (the same check the gate uses
for citations) plus a minimum length: a model that "quotes" a word found in every chunk has proved nothing.
Nothing here calls a model, reads a clock or does I/O.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

from ragmon.metrics.quotes import normalise_for_quote, verify_quote

#: a quote shorter than this (after normalization) proves nothing: "the" occurs in every chunk
MIN_QUOTE_CHARS = 8

_FOLD = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"', "\u2013": "-", "\u2014": "-",
                       "\u00a0": " "})
_SPACE = re.compile(r"\s+")
# a sentence ends at . ! ? (optionally followed by a closing quote/bracket) and whitespace, or at a newline
_SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]]*\s+|\n+")
_WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)*", re.UNICODE)
_ASCII_WORD = re.compile(r"[a-z0-9]+(?:'[a-z0-9]+)*")
_NO_TERM = frozenset({""})
# numbers written like 1,000 or 3.5 stay one token
_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")

STOPWORDS = frozenset(
    """a about above after again against all am an and any are as at be because been before being below between
    both but by can could did do does doing down during each few for from further had has have having he her here
    hers herself him himself his how i if in into is it its itself just me more most my myself no nor not of off
    on once only or other our ours ourselves out over own same she should so some such than that the their theirs
    them themselves then there these they this those through to too under until up very was we were what when
    where which while who whom why will with would you your yours yourself yourselves also may might must shall
    yes ok okay please us get got""".split()
)
#: negations are content: "can be withdrawn" and "cannot be withdrawn" must not look alike
NEGATIONS = frozenset({"no", "not", "never", "cannot", "can't", "won't", "don't", "doesn't", "isn't", "aren't",
                       "wasn't", "weren't", "nor", "without", "none"})


def normalize(text: str) -> str:
    """Fold Unicode form, typographic punctuation, case and runs of whitespace."""
    return _SPACE.sub(" ", unicodedata.normalize("NFKC", text).translate(_FOLD)).strip().casefold()


def evidence_holds(quote: str | None, chunk_text: str | None) -> bool:
    """A judge's evidence quote occurs in the chunk (``verify_quote``) and is long enough to mean something."""
    if not verify_quote(quote, chunk_text):
        return False
    q = normalise_for_quote(quote or "").strip(" \"'.,;:")
    return len(q) >= MIN_QUOTE_CHARS or q == normalise_for_quote(chunk_text or "").strip(" \"'.,;:")


def sentences(text: str) -> list[str]:
    """Split text into sentences (a regex splitter: abbreviations like "e.g." can split a sentence in two)."""
    return [s.strip() for s in _SENTENCE_END.split(text.strip()) if s and s.strip()]


def stem(word: str) -> str:
    """A deliberately light suffix stripper so 'withdrawn'/'withdrawal'/'withdraw' meet; not a real stemmer."""
    for suffix in ("ational", "ations", "ation", "ments", "ment", "ings", "ing", "ness", "ies", "ied", "als",
                   "al", "edly", "ed", "es", "ly", "s", "n"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 4:
            word = word[: -len(suffix)]
            break
    if word.endswith("e") and len(word) > 4:
        word = word[:-1]
    return word


def content_terms(text: str) -> list[str]:
    """Stemmed content words (stopwords dropped, negations kept as the token 'not'), in order."""
    return [t for t in map(_term, _words(text)) if t]


def content_term_set(text: str) -> frozenset[str]:
    """``frozenset(content_terms(text))``, looking each distinct word up once."""
    return frozenset(map(_term, set(_words(text)))) - _NO_TERM


def _words(text: str) -> list[str]:
    # ASCII text skips ``normalize``: NFKC and the typographic fold change no ASCII character, casefold is lower
    # there, and collapsing whitespace cannot change which words the pattern finds (words hold no whitespace);
    # on lowercase ASCII, _ASCII_WORD finds exactly what _WORD finds, twice as fast. Most chunk text is ASCII,
    # and normalizing was a third of the heuristic judge's time (``str.isascii`` is O(1)).
    if text.isascii():
        return _ASCII_WORD.findall(text.lower())
    return _WORD.findall(normalize(text))


@lru_cache(maxsize=200_000)
def _term(word: str) -> str:
    """One word's term ('' for a stopword); cached, since vocabularies are small and texts repeat words."""
    word = word.replace("’", "'")
    if word in NEGATIONS or word.endswith("n't"):
        return "not"
    if word in STOPWORDS or (len(word) == 1 and not word.isdigit()):
        return ""
    return word if _NUMBER.fullmatch(word) else stem(word)


def coverage(terms: list[str] | set[str], against: set[str]) -> float:
    """Share of distinct ``terms`` found in ``against`` (0 when there are no terms)."""
    distinct = set(terms)
    return len(distinct & against) / len(distinct) if distinct else 0.0
