"""An example retriever for ``ragmon gate``: Okapi BM25 over ``examples/corpus.jsonl``, pure Python, deterministic.

    ragmon gate examples/golden/dev.json --retriever examples.retriever:search --k 3 --depth 8 \\
        --min-coverage 0.7 --min-mrr 0.6

``search(question, k)`` returns up to k ``(chunk_id, score)`` pairs, best first; ties are broken by chunk id so
every run ranks identically. ``chunk_text(chunk_id)`` returns a chunk's text (``ragmon gate --answerer`` hands
it to the answerer and the judge). ``CORPUS_SNAPSHOT`` tells the gate which corpus it serves, so the run artifact can
record it and warn when the golden set was adjudicated against another snapshot. Only chunks without a tenant,
or of the tenant in ``RAGMON_EXAMPLE_TENANT``, are searched: that filter is what a permission test checks.
Set ``RAGMON_EXAMPLE_CORPUS`` to point it at another JSONL file with the same fields.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections import Counter
from functools import lru_cache
from pathlib import Path

CORPUS_SNAPSHOT = "2026-03-01"
K1 = 1.2
B = 0.75
_TOKEN = re.compile(r"[a-z0-9]+")
_STOP = frozenset(
    "a an and are as at be by can do does for from how i if in is it my of on or the to we what when where which "
    "who why will with you your".split()
)


def tokens(text: str) -> list[str]:
    """Lower-cased alphanumeric words without stop words, with a crude plural strip ("invoices" → "invoice")."""
    out = []
    for word in _TOKEN.findall(text.lower()):
        if word in _STOP:
            continue
        if len(word) > 4 and word.endswith("s") and not word.endswith("ss"):
            word = word[:-1]
        out.append(word)
    return out


class BM25Index:
    """An in-memory BM25 index over (chunk_id, text, tenant) rows."""

    def __init__(self, rows: list[dict[str, str]]):
        self.ids = [r["chunk_id"] for r in rows]
        self.texts = {r["chunk_id"]: r["text"] for r in rows}
        self.tenants = [r.get("tenant") for r in rows]
        self.docs = [Counter(tokens(r["text"])) for r in rows]
        self.lengths = [sum(d.values()) for d in self.docs]
        self.avg_length = sum(self.lengths) / max(len(self.docs), 1)
        df: Counter[str] = Counter()
        for d in self.docs:
            df.update(d.keys())
        n = len(self.docs)
        self.idf = {term: math.log(1 + (n - f + 0.5) / (f + 0.5)) for term, f in df.items()}

    def search(self, question: str, k: int, tenant: str | None = None) -> list[tuple[str, float]]:
        terms = tokens(question)
        scored = []
        for i, doc in enumerate(self.docs):
            if self.tenants[i] is not None and self.tenants[i] != tenant:
                continue
            score = 0.0
            norm = K1 * (1 - B + B * self.lengths[i] / self.avg_length)
            for term in terms:
                tf = doc.get(term, 0)
                if tf:
                    score += self.idf[term] * tf * (K1 + 1) / (tf + norm)
            if score > 0:
                scored.append((self.ids[i], round(score, 6)))
        scored.sort(key=lambda pair: (-pair[1], pair[0]))
        return scored[:k]


@lru_cache(maxsize=4)
def load_index(path: str) -> BM25Index:
    with open(path, encoding="utf-8") as fh:
        rows = [json.loads(line) for line in fh if line.strip()]
    return BM25Index(rows)


def _corpus_path() -> str:
    return os.environ.get("RAGMON_EXAMPLE_CORPUS") or str(Path(__file__).with_name("corpus.jsonl"))


def search(question: str, k: int) -> list[tuple[str, float]]:
    """The top ``k`` chunks for ``question`` as (chunk_id, BM25 score) pairs, best first."""
    return load_index(_corpus_path()).search(question, k, tenant=os.environ.get("RAGMON_EXAMPLE_TENANT"))


def chunk_text(chunk_id: str) -> str | None:
    """The text of ``chunk_id`` (None for an id the corpus does not hold)."""
    return load_index(_corpus_path()).texts.get(chunk_id)
