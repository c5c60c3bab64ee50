"""Simulated incidents whose cause is known, for measuring ``drift explain`` (``bench/drift_explain.py``, tests).

Traffic of one group carries every dimension ``drift explain`` decomposes by: four sources of documents (ids
``<source>/doc<k>``, Zipf popularity), an index version, retriever parameters with a reranker, a model and a
prompt version, five question types, trending popular questions (Zipf, re-drawn each window), six tenants. Each
window's mix of sources, question types and tenants is drawn around a fixed mean (Dirichlet), so windows differ
as production hours do. ``top1_score`` is a level per question type, source and question plus noise.

Popular questions stay popular over the week, and each question's answer lives in one source. An incident in
the current window (``KINDS``), with the dimension that caused it:

* ``stale_index`` → ``index_version``: a share of the traffic is served by an old index version, scoring lower;
* ``source_dropped`` → ``source_before``: one source leaves the index; its questions retrieve other sources'
  documents, badly (the traces name the sources they got, not the one that is missing: only where the same
  questions were answered from in the reference points at it);
* ``new_question_type`` → ``question_type``: questions of a type never seen before, that the corpus covers
  badly, make up a share of the traffic;
* ``model_change`` → ``model``: a new model version (which rewrites the queries) serves a share of the traffic,
  retrieving worse.

Severity and share are drawn per trial. ``windows`` returns plain columns for ``traces`` and ``question_types``;
``insert`` writes them through a store's ``insert_columns``. Pure apart from ``insert``: numpy only, every draw
from the generator passed in.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np

from ragmon.drift.simulation.synthetic_queries import TrafficStore

KINDS: dict[str, str] = {"stale_index": "index_version", "source_dropped": "source_before",
                         "new_question_type": "question_type", "model_change": "model"}
SOURCES = ("kb", "handbook", "tickets", "wiki")
SOURCE_SHARE = np.array([0.35, 0.25, 0.25, 0.15])
SOURCE_OFFSET = np.array([0.02, 0.0, -0.03, -0.01])
TYPES = ("lookup", "how_to", "policy", "troubleshoot", "account")
TYPE_SHARE = np.array([0.3, 0.25, 0.2, 0.15, 0.1])
TYPE_OFFSET = np.array([0.03, 0.0, -0.02, -0.05, 0.01])
TENANTS = ("acme", "globex", "initech", "umbrella", "hooli", "stark")
TENANT_SHARE = np.array([0.3, 0.2, 0.15, 0.15, 0.1, 0.1])
CONCENTRATION = 80  # Dirichlet concentration of a window's mix (smaller: windows differ more)
POOL = 2000         # questions per type
DOCS = 400          # documents per source
BASE, QUERY_SD, NOISE_SD = 0.6, 0.05, 0.05
INDEX, MODEL, PROMPT = "idx-2026-11-30", "gpt-rag@2026-10", "answer@7"


@dataclass(frozen=True, slots=True)
class Incident:
    """What went wrong in the current window: ``kind`` (a key of ``KINDS``), the share of traffic it touches
    (for ``source_dropped``, which source) and how much lower the touched traces score."""

    kind: str
    share: float
    drop: float
    source: int = 0

    @property
    def cause(self) -> str:
        return KINDS[self.kind]

    @property
    def segment(self) -> str:
        """The segment value that carries the incident."""
        return {"stale_index": "idx-2026-09-14", "source_dropped": SOURCES[self.source],
                "new_question_type": "comparison", "model_change": "gpt-rag@2026-12"}[self.kind]


def draw_incident(kind: str, rng: np.random.Generator) -> Incident:
    """An incident of ``kind`` with a share and a severity drawn at random."""
    if kind not in KINDS:
        raise ValueError(f"unknown incident {kind!r}; known: {', '.join(KINDS)}")
    return Incident(kind, float(rng.uniform(0.15, 0.5)), float(rng.uniform(0.06, 0.15)),
                    int(rng.integers(0, len(SOURCES))))


@dataclass
class Traffic:
    """One group's traffic generator: its questions' levels and popularity."""

    rng: np.random.Generator

    def __post_init__(self) -> None:
        self.offsets = self.rng.normal(0.0, QUERY_SD, size=(len(TYPES) + 1, POOL))
        ranks = np.arange(1, POOL + 1, dtype=float)
        self.popularity = ranks ** -1.1 / np.sum(ranks ** -1.1)
        self.order = self.rng.permutation(POOL)  # which questions are popular (for the week)
        # where each question's answer lives
        self.home = self.rng.choice(len(SOURCES), size=(len(TYPES) + 1, POOL), p=SOURCE_SHARE)

    def window(self, n: int, start: datetime, seconds: int, incident: Incident | None = None) -> dict[str, list[Any]]:
        """``n`` traces in ``[start, start + seconds)`` as column lists (plus ``question_type``)."""
        rng = self.rng
        types = rng.choice(len(TYPES), size=n, p=rng.dirichlet(CONCENTRATION * TYPE_SHARE))
        tenants = rng.choice(len(TENANTS), size=n, p=rng.dirichlet(CONCENTRATION * TENANT_SHARE))
        reranked = rng.random(n) < 0.7
        questions = self.order[rng.choice(POOL, size=n, p=self.popularity)]
        # a question's top document comes from where its answer lives, now and then from another source
        sources = np.where(rng.random(n) < 0.9, self.home[types, questions], rng.choice(len(SOURCES), size=n))
        level = BASE + TYPE_OFFSET[types] + SOURCE_OFFSET[sources] + 0.01 * reranked
        index = np.array([INDEX] * n, dtype=object)
        model = np.array([MODEL] * n, dtype=object)
        type_names = np.array(TYPES, dtype=object)[types]
        if incident is not None:
            hit = rng.random(n) < incident.share
            if incident.kind == "stale_index":
                index[hit] = incident.segment
                level[hit] -= incident.drop
            elif incident.kind == "model_change":
                model[hit] = incident.segment
                level[hit] -= incident.drop
            elif incident.kind == "new_question_type":
                type_names[hit] = incident.segment
                types = np.where(hit, len(TYPES), types)
                level[hit] = BASE - incident.drop - 0.02
            elif incident.kind == "source_dropped":
                hit = sources == incident.source
                others = [i for i in range(len(SOURCES)) if i != incident.source]
                sources = np.where(hit, rng.choice(others, size=n), sources)
                level[hit] -= incident.drop
        level = level + self.offsets[types, questions]
        top1 = level + rng.normal(0.0, NOISE_SD, size=n)
        scores = [[float(t), float(t - 0.03), float(t - 0.06)] for t in top1]
        docs = rng.integers(0, DOCS, size=n)
        ts = [start + timedelta(seconds=float(x)) for x in np.sort(rng.uniform(0, seconds - 1, size=n))]
        return {
            "ts": ts, "index_version": list(index), "model": list(model), "question_type": list(type_names),
            "question": [f"{type_names[j]} question {types[j]}-{questions[j]}" for j in range(n)],
            "tenant": [TENANTS[t] for t in tenants],
            "retriever_params": [json.dumps({"k": 3, "reranker": "ce-v2" if r else "none"}) for r in reranked],
            "retrieved_doc_ids": [[f"{SOURCES[s]}/doc{d}", f"{SOURCES[s]}/doc{d + 1}", f"wiki/doc{d}"]
                                  for s, d in zip(sources, docs, strict=True)],
            "retrieved_scores": scores,
        }


def insert(store: TrafficStore, cols: dict[str, list[Any]], *, retriever: str, variant: str, stratum: str,
           run_id: str) -> int:
    """Write one window's traces (and each trace's question type) into the store."""
    n = len(cols["ts"])
    name, version = retriever.split("@", 1)
    ids = [f"{run_id}-{j}" for j in range(n)]
    now = datetime.now(UTC)
    models = [m.split("@", 1) for m in cols["model"]]
    store.insert_columns("traces", {
        "trace_id": ids, "query_id": ids, "ts": cols["ts"], "retriever_name": [name] * n,
        "retriever_version": [version] * n, "variant": [variant] * n, "category": [stratum] * n,
        "corpus_snapshot": ["2026-11-30"] * n, "index_version": cols["index_version"],
        "retriever_params": cols["retriever_params"], "question": cols["question"], "tenant": cols["tenant"],
        "retrieved_chunk_ids": [[f"{d}#c0" for d in row] for row in cols["retrieved_doc_ids"]],
        "retrieved_doc_ids": cols["retrieved_doc_ids"], "retrieved_doc_versions": [["v1"] * 3] * n,
        "retrieved_scores": cols["retrieved_scores"], "retrieved_ranks": [[1, 2, 3]] * n,
        "model_name": [m[0] for m in models], "model_version": [m[1] for m in models],
        "prompt_id": [PROMPT.split("@")[0]] * n, "prompt_version": [PROMPT.split("@")[1]] * n,
        "behaviour": ["answer"] * n, "latency_total_ms": [500.0] * n, "cost_usd": [0.001] * n, "ingested_at": [now] * n,
    })
    store.insert_columns("question_types", {
        "trace_id": ids, "query_id": ids, "ts": cols["ts"], "classified_at": [now] * n,
        "retriever_name": [name] * n, "variant": [variant] * n, "category": [stratum] * n,
        "question_type": cols["question_type"], "status": ["ok"] * n, "error": [""] * n,
        "classifier_name": ["simulated"] * n, "classifier_fingerprint": ["simulated"] * n,
    })
    return n
