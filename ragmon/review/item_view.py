"""What a reviewer sees of one trace: ranked chunks, the answer split into sentences with their citations linked
to the cited chunk, the quoted span located in the chunk, and the versions that produced the answer.

Plain data for the HTML page and the JSON API alike. All text stays raw here: escaping is the renderer's job
(Jinja autoescape, JSON encoding), and anchors are built from ranks, never from producer-supplied ids.
Must not: read the store, or decide what a reviewer may see.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

# a sentence ends after . ! ? (and one closing quote or bracket, kept with it) before whitespace, or at a newline
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|(?<=[.!?][\"')\]])\s+|\n+")


def split_sentences(text: str) -> list[str]:
    """Answer sentences as the citation ``sentence`` indexes (0-based) count them: split after . ! ? or newline."""
    return [s.strip() for s in _SENTENCE_END.split(text.strip()) if s and s.strip()]


@dataclass(frozen=True)
class ChunkView:
    index: int  # 1-based display position; the anchor is f"chunk-{index}"
    chunk_id: str
    doc_id: str
    doc_version: str
    rank: int
    score: float  # NaN: the retriever gave none
    text: str
    in_context: bool
    cited: bool
    # the first cited quote located in the text: text = before + highlighted + after
    before: str
    highlighted: str
    after: str

    @property
    def anchor(self) -> str:
        return f"chunk-{self.index}"


@dataclass(frozen=True)
class CitationView:
    number: int
    chunk_id: str
    anchor: str | None  # None: the cited chunk is not among the retrieved ones
    quote: str
    quote_found: bool


@dataclass(frozen=True)
class SentenceView:
    index: int
    text: str
    citations: tuple[CitationView, ...]


@dataclass(frozen=True)
class ItemView:
    trace_id: str
    timestamp: str
    question: str
    category: str
    behaviour: str
    answer: str
    sentences: tuple[SentenceView, ...]
    orphan_citations: tuple[CitationView, ...]  # citing a sentence index past the end of the answer
    chunks: tuple[ChunkView, ...]
    versions: dict[str, str]


def locate(quote: str, text: str) -> tuple[int, int] | None:
    """Where ``quote`` occurs in ``text``, ignoring case and runs of whitespace; None if it does not."""
    words = quote.split()
    if not words:
        return None
    m = re.search(r"\s+".join(re.escape(w) for w in words), text, re.IGNORECASE)
    return (m.start(), m.end()) if m else None


def build_item_view(trace: dict[str, Any]) -> ItemView:
    retrieved = sorted(trace["retrieved"], key=lambda c: c["rank"])
    anchor_of: dict[str, int] = {}
    for i, c in enumerate(retrieved, start=1):
        anchor_of.setdefault(c["chunk_id"], i)
    quotes: dict[str, str] = {}
    for cit in trace["citations"]:
        if cit.get("quote"):
            quotes.setdefault(cit["chunk_id"], cit["quote"])
    context = set(trace["context"]["chunk_ids"])
    cited = {cit["chunk_id"] for cit in trace["citations"]}
    chunks = []
    for i, c in enumerate(retrieved, start=1):
        text = c.get("text") or ""
        span = (locate(quotes[c["chunk_id"]], text)
                if c["chunk_id"] in quotes and anchor_of[c["chunk_id"]] == i else None)
        before, mark, after = (text[: span[0]], text[span[0]: span[1]], text[span[1]:]) if span else (text, "", "")
        chunks.append(ChunkView(i, c["chunk_id"], c["doc_id"], c.get("doc_version") or "", int(c["rank"]),
                                math.nan if c["score"] is None else float(c["score"]), text, c["chunk_id"] in context,
                                c["chunk_id"] in cited, before, mark, after))
    texts = {c["chunk_id"]: c.get("text") or "" for c in retrieved}
    sentences = split_sentences(trace["answer"])
    by_sentence: dict[int, list[CitationView]] = {}
    for n, cit in enumerate(trace["citations"], start=1):
        idx = anchor_of.get(cit["chunk_id"])
        quote = cit.get("quote") or ""
        view = CitationView(n, cit["chunk_id"], f"chunk-{idx}" if idx else None, quote,
                            bool(quote) and locate(quote, texts.get(cit["chunk_id"], "")) is not None)
        by_sentence.setdefault(int(cit["sentence"]), []).append(view)
    sentence_views = tuple(SentenceView(i, s, tuple(by_sentence.get(i, ()))) for i, s in enumerate(sentences))
    orphans = tuple(v for i, views in sorted(by_sentence.items()) if i >= len(sentences) for v in views)
    r, m, p = trace["retriever"], trace["model"], trace["prompt"]
    versions = {
        "retriever": f"{r['name']} {r['version']} ({r['variant']})",
        "model": f"{m['name']} {m['version']}",
        "prompt": f"{p['id']} v{p['version']}",
        "corpus snapshot": trace["corpus_snapshot"],
        "index": trace["index_version"],
    }
    return ItemView(trace["trace_id"], trace["timestamp"], trace["question"], trace["category"], trace["behaviour"],
                    trace["answer"], sentence_views, orphans, tuple(chunks), versions)
