"""The demo's story as data: two days of traffic for a production retriever and a shadow candidate, with a
known incident injected partway through. Pure: returns trace.v1 documents, no I/O.

The incident, from ``incident_start`` on, in one stratum (``incident_stratum``) of production traffic only:
- **retrieval-score drift** — every retrieved score is scaled down (a stale index: the same chunks come
  back, with less confidence), so top-1 and mean scores shift;
- **faithfulness drop** — answers assert things the retrieved chunks do not say (a prompt regression).
Every trace is asked by a user of tenant ``acme`` over ``acme`` chunks, except that the last ``leaks``
production traces of ``leak_stratum`` retrieve one chunk of tenant ``globex`` at rank 2: **permission leaks**,
which ingest counts on every trace and ``ragmon leaks list`` names.
The shadow candidate (``hybrid@v2``) is less noisy than production on one stratum and noisier on another,
so the shadow comparison has a winner stratum and a loser stratum.

A **new question type**: for the last ``new_type_hours``, a share of one stratum's questions
(``new_type_stratum``) ask for an amount ("How much ..."), a table-number question the golden set the demo
builds from the first day's traffic does not hold, so the coverage check names it.

A **canary cohort**: for the last ``canary_hours``, a share of production queries (``canary_share``) is served
by ``hybrid@v2`` as variant ``canary``, and its users reformulate more often (``canary_reformulation`` against
``reformulation``); ``generate_outcomes`` makes the outcome events (schemas/outcome.v1) of both arms.

A **burst of thumbs-down**: users give ``feedback.rating = -1`` to a share (``thumbs_down_share``) of the
incident's unsupported answers, over a thin background (``thumbs_down_background``) everywhere; the cause a
triage reviewer finds in those traces is the answer asserting what its passages do not say.

**History** for judge drift (``generate_history``): ``history_weeks`` thin past weeks of production traffic
(``history_per_week`` traces each, ``history_unsupported`` of the answers unsupported, so a judge has both
verdicts to give), before the two days.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from ragmon.demo.traffic import (
    _TOPICS,
    DEFAULT_STRATA,
    HOSTILE_TEXT,
    RetrieverProfile,
    generate_traces,
    relevance_of,
)
from ragmon.review.records import iso_week

PRODUCTION = RetrieverProfile(name="hybrid", version="v1", k=10, noise=0.6, latency_ms_median=45.0)
CANDIDATE = RetrieverProfile(
    name="hybrid", version="v2", k=10, noise=0.6, stratum_noise={"shipping": 0.2, "returns": 1.6},
    latency_ms_median=52.0,
)
WINNER_STRATUM, LOSER_STRATUM = "shipping", "returns"

#: question shape (its opening words) → the fact a relevant chunk states, in the question's own words
_FACTS = (
    ("How do I change", "You change the {t} for order {i} on the order page under Edit {t}."),
    ("Why was my", "A {t} on account {i} is rejected when it fails the {s} verification check."),
    ("Can I get a refund", "A refund on the {t} from ticket {i} is possible within 30 days under the {s} policy."),
    ("What is the policy", "The {s} policy on {t} for case {i} allows one free change per month."),
)
_QUESTION = re.compile(r"(?P<t>" + "|".join(map(re.escape, _TOPICS)) + r")\D*(?P<i>\d+)")
_REFUSAL = "I cannot find information about that in the documents."
_UNSUPPORTED = (
    "Refunds are always paid in cash within one hour, no receipt needed.",
    "Every customer is automatically entitled to a lifetime discount of 80 percent.",
    "Our warehouse in Reykjavik ships overnight to every country for free.",
)


@dataclass(frozen=True)
class Scenario:
    """What the demo generates and injects; the printed summary compares what ragmon found with this."""

    n_queries: int = 12_000
    hours: float = 48.0
    shadow_coverage: float = 0.5
    incident_hours: float = 6.0
    incident_stratum: str = "billing"
    score_scale: float = 0.8
    leak_stratum: str = "consent"
    leaks: int = 2
    seed: int = 7
    strata: tuple[str, ...] = DEFAULT_STRATA
    new_type_stratum: str = "consent"
    new_type_share: float = 0.4
    new_type_hours: float = 24.0
    canary_hours: float = 24.0
    canary_share: float = 0.2
    reformulation: float = 0.08
    canary_reformulation: float = 0.2
    thumbs_down_share: float = 0.4
    thumbs_down_background: float = 0.005
    history_weeks: int = 6
    history_per_week: int = 480
    history_unsupported: float = 0.3
    judge_drift_stratum: str = "returns"
    reviewer_disagreement: float = 0.04
    drifted_disagreement: float = 0.45

    def start(self, now: datetime) -> datetime:
        return now - timedelta(hours=self.hours)

    def incident_start(self, now: datetime) -> datetime:
        return now - timedelta(hours=self.incident_hours)

    def new_type_start(self, now: datetime) -> datetime:
        return now - timedelta(hours=self.new_type_hours)

    def canary_start(self, now: datetime) -> datetime:
        return now - timedelta(hours=self.canary_hours)

    def triage_week(self, now: datetime) -> str:
        """The ISO week the thumbs-down burst falls in (this week, unless the demo runs early on a Monday)."""
        return iso_week(now - timedelta(hours=self.incident_hours / 2))

    def history_week_starts(self, now: datetime) -> list[datetime]:
        """Monday 00:00 UTC of each history week, oldest first; the last is the week before ``now``'s."""
        monday = (now - timedelta(days=now.weekday())).replace(hour=0, minute=0, second=0, microsecond=0)
        return [monday - timedelta(weeks=k) for k in range(self.history_weeks, 0, -1)]


def generate(scenario: Scenario, now: datetime | None = None) -> list[dict[str, Any]]:
    """Every trace of the scenario, in time order, with the incident applied."""
    now = now or datetime.now(UTC)
    spacing = scenario.hours * 3600.0 / max(1, scenario.n_queries + 1)
    traces = generate_traces(
        scenario.n_queries, scenario.strata, seed=scenario.seed, start=scenario.start(now),
        production=PRODUCTION, candidate=CANDIDATE, coverage=scenario.shadow_coverage, spacing_seconds=spacing,
        hostile_every=97,
    )
    relevance = relevance_of(scenario.n_queries, scenario.strata, scenario.seed)
    traces = [_realistic(t, relevance.get(t["query_id"], {})) for t in traces]
    incident = scenario.incident_start(now)
    for i, trace in enumerate(traces):
        if (trace["retriever"]["variant"] == "production" and trace["category"] == scenario.incident_stratum
                and datetime.fromisoformat(trace["timestamp"]) >= incident):
            traces[i] = _inject(trace, scenario.score_scale, i)
    new_type = scenario.new_type_start(now)
    for i, trace in enumerate(traces):
        if (trace["category"] == scenario.new_type_stratum and datetime.fromisoformat(trace["timestamp"]) >= new_type
                and share_of(trace["query_id"]) < scenario.new_type_share):
            traces[i] = dict(traces[i], question=_AMOUNT + trace["question"])  # both twins of a query alike
    canary = scenario.canary_start(now)
    for i, trace in enumerate(traces):
        if (trace["retriever"]["variant"] == "production" and datetime.fromisoformat(trace["timestamp"]) >= canary
                and share_of("canary/" + trace["query_id"]) < scenario.canary_share):
            traces[i] = dict(trace, retriever=dict(trace["retriever"], version=CANDIDATE.version, variant="canary"))
    return _with_tenants(_with_feedback(traces, scenario, now), scenario.leak_stratum, scenario.leaks)


def generate_history(scenario: Scenario, now: datetime) -> list[dict[str, Any]]:
    """Production traces of the history weeks (each spread over its week, ending before the two days start),
    ``history_unsupported`` of their answers unsupported. Query ids differ from the two days' (own seeds)."""
    out: list[dict[str, Any]] = []
    for k, start in enumerate(scenario.history_week_starts(now)):
        end = min(start + timedelta(weeks=1), scenario.start(now)) - timedelta(hours=1)
        n, seed = scenario.history_per_week, 1_000 * (scenario.seed + 1) + k
        spacing = (end - start - timedelta(hours=1)).total_seconds() / n
        relevance = relevance_of(n, scenario.strata, seed)
        for i, trace in enumerate(generate_traces(n, scenario.strata, seed=seed, start=start + timedelta(hours=1),
                                                  production=PRODUCTION, spacing_seconds=spacing)):
            trace = _realistic(trace, relevance.get(trace["query_id"], {}))
            if share_of("history/" + trace["query_id"]) < scenario.history_unsupported:
                trace = _inject(trace, 1.0, i)
            out.append(dict(trace, attributes={"demo_seed": str(scenario.seed), "demo_history": "true"}))
    return _with_tenants(out, scenario.leak_stratum, 0)


def unsupported(trace: dict[str, Any]) -> bool:
    """Whether the answer asserts one of the injected claims no passage states (what a reviewer would find)."""
    return any(claim in trace["answer"] for claim in _UNSUPPORTED)


def _with_feedback(traces: list[dict[str, Any]], scenario: Scenario, now: datetime) -> list[dict[str, Any]]:
    """Thumbs-down from users (production and canary; shadow answers are never shown): the burst on the incident's
    unsupported answers, and the thin background everywhere else. Marked ``demo_feedback`` burst/background."""
    incident = scenario.incident_start(now)
    out = []
    for trace in traces:
        u = share_of("thumbs-down/" + trace["query_id"])
        kind = ""
        if trace["retriever"]["variant"] != "shadow":
            burst = (trace["category"] == scenario.incident_stratum and unsupported(trace)
                     and datetime.fromisoformat(trace["timestamp"]) >= incident)
            kind = "burst" if burst and u < scenario.thumbs_down_share else (
                "background" if u < scenario.thumbs_down_background else "")
        out.append(dict(trace, feedback={"rating": -1},
                        attributes=dict(trace.get("attributes", {}), demo_feedback=kind)) if kind else trace)
    return out


USER_TENANT, LEAKED_TENANT = "acme", "globex"


def _with_tenants(traces: list[dict[str, Any]], leak_stratum: str, leaks: int) -> list[dict[str, Any]]:
    """Every trace asked by an ``acme`` user over ``acme`` chunks; the last ``leaks`` production traces of
    ``leak_stratum`` with two or more chunks get their rank-2 chunk from ``globex`` (a broken tenant filter)."""
    out = [dict(t, tenant=USER_TENANT, retrieved=[dict(r, tenant=USER_TENANT) for r in t["retrieved"]])
           for t in traces]
    leaky = [i for i, t in enumerate(out) if t["retriever"]["variant"] == "production"
             and t["category"] == leak_stratum and len(t["retrieved"]) >= 2][-leaks:] if leaks > 0 else []
    for i in leaky:
        retrieved = list(out[i]["retrieved"])
        retrieved[1] = dict(retrieved[1], tenant=LEAKED_TENANT)
        out[i] = dict(out[i], retrieved=retrieved, attributes=dict(out[i].get("attributes", {}), demo_leak="true"))
    return out


def generate_outcomes(scenario: Scenario, traces: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Outcome events of the production and canary traces: seconds after each query, users open a cited
    passage, resolve, escalate, reformulate (more often in the canary cohort) or leave feedback."""
    events = []
    for trace in traces:
        variant = trace["retriever"]["variant"]
        if variant == "shadow":
            continue
        qid, ts = trace["query_id"], datetime.fromisoformat(trace["timestamp"])
        u = [share_of(f"{k}/{qid}") for k in range(5)]
        reformulation = scenario.canary_reformulation if variant == "canary" else scenario.reformulation
        chances = (("citation_opened", 0.35 if trace["citations"] else 0.0), ("resolved", 0.6),
                   ("escalated", 0.04), ("reformulated", reformulation), ("feedback", 0.1))
        rating = (trace.get("feedback") or {}).get("rating")
        for n, (kind, p) in enumerate(chances):
            if kind == "feedback" and rating is not None:  # the trace's own feedback, as the outcome event too
                events.append({"query_id": qid, "kind": kind, "value": rating,
                               "time": (ts + timedelta(seconds=5 + 10 * n)).isoformat()})
            elif u[n] < p:
                event = {"query_id": qid, "kind": kind, "time": (ts + timedelta(seconds=5 + 10 * n)).isoformat()}
                if kind == "feedback":  # a thumbs-up: the demo's complaints are the injected thumbs-down (triage
                    event["value"] = 1  # counts negative feedback events as thumbs-down too)
                events.append(event)
    return events


#: the opening of the injected table-number questions (the heuristic classifier's "how much" rule)
_AMOUNT = "How much does it cost? "


def share_of(query_id: str) -> float:
    """A stable number in [0, 1) per query id, so a production trace and its shadow twin are chosen together."""
    return int(hashlib.sha256(query_id.encode()).hexdigest()[:8], 16) / 2**32


def _inject(trace: dict[str, Any], scale: float, i: int) -> dict[str, Any]:
    retrieved = [dict(r, score=round(r["score"] * scale, 6)) for r in trace["retrieved"]]
    if trace["behaviour"] != "answer" or not trace["citations"]:
        return dict(trace, retrieved=retrieved, attributes=dict(trace.get("attributes", {}), demo_incident="true"))
    claims = [_UNSUPPORTED[i % len(_UNSUPPORTED)], _UNSUPPORTED[(i + 1) % len(_UNSUPPORTED)]]
    cited = trace["citations"][0]["chunk_id"]
    return dict(trace, retrieved=retrieved, answer=" ".join(claims),
                citations=[{"sentence": n, "chunk_id": cited, "quote": c.rstrip(".")} for n, c in enumerate(claims)],
                attributes=dict(trace.get("attributes", {}), demo_incident="true"))


def _realistic(trace: dict[str, Any], relevant: dict[str, int]) -> dict[str, Any]:
    """Give chunks and answers words a judge can check: relevant chunks state a fact in the question's words,
    the answer restates the facts found in its context with quoted citations, and a context without any
    relevant chunk makes the system refuse."""
    question, stratum = trace["question"], trace["category"]
    match = _QUESTION.search(question)
    fact = next((f for opening, f in _FACTS if question.startswith(opening)), _FACTS[0][1])
    words = {"t": match["t"] if match else "request", "i": match["i"] if match else "0", "s": stratum}
    retrieved = []
    for r in trace["retrieved"]:
        if r.get("text") == HOSTILE_TEXT:
            retrieved.append(r)
        elif relevant.get(r["chunk_id"], 0) >= 2:
            retrieved.append(dict(r, text=fact.format(**words) + f" See {r['doc_id']} for the {stratum} details."))
        else:
            retrieved.append(dict(r, text=f"Opening hours of the {stratum} team are 9 to 5 on weekdays "
                                           f"({r['chunk_id']})."))
    texts = {r["chunk_id"]: r["text"] for r in retrieved}
    context = trace["context"]["chunk_ids"]
    supported = [c for c in context if relevant.get(c, 0) >= 2][:2]
    if not trace["answer"]:
        return dict(trace, retrieved=retrieved)
    if not supported:
        return dict(trace, retrieved=retrieved, answer=_REFUSAL, behaviour="refuse", citations=[])
    first_sentences = [texts[c].split(". ")[0].rstrip(".") + "." for c in supported]
    answer = " ".join(first_sentences)
    citations = [{"sentence": n, "chunk_id": c, "quote": first_sentences[n].rstrip(".")}
                 for n, c in enumerate(supported)]
    return dict(trace, retrieved=retrieved, answer=answer, behaviour="answer", citations=citations)
