"""What the operations harness records while the daemon runs, and what it reads back afterwards: plain data.

Every time is wall-clock Unix time (``time.time()``), so it compares with the daemon's log lines and with the
fault windows. The harness fills these in (``scenario.py`` and its helpers); the checkers (``invariants.py``)
only read them, so a negative control can hand a checker doctored records. Must not do I/O.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any


@dataclass
class OtlpSent:
    """One query the instrumented application ran (``rag_app.py``), and how much of it reached the other side."""

    trace_id: str           # the OpenTelemetry trace id, 32 hex digits (ragmon's trace_id for it)
    path: str               # "collector" (→ Collector → Kafka) or "direct" (POST /v1/traces on the daemon)
    question: str
    answer: str
    llm_seconds: float      # how long its LLM call lasted
    started: float
    ended: float
    spans: int              # spans the application finished for it
    accepted: int           # of those, spans whose export was answered 200

    @property
    def whole(self) -> bool:
        """Every span was accepted: the query must be stored, whole."""
        return self.spans > 0 and self.accepted == self.spans


@dataclass
class Sent:
    """Everything the harness gave the daemon, as acknowledged by the receiving side."""

    native: dict[str, str] = field(default_factory=dict)              # trace_id → query_id, acked by the broker
    invalid: dict[tuple[int, int], str] = field(default_factory=dict)  # (partition, offset) → expected reason
    seed: set[str] = field(default_factory=set)                       # loaded with `ragmon ingest --file` first
    otlp: dict[str, OtlpSent] = field(default_factory=dict)
    non_queries: dict[str, str] = field(default_factory=dict)         # OTLP trace id → path: not RAG queries
    outcomes: set[str] = field(default_factory=set)                   # event ids, acked
    invalid_outcomes: dict[tuple[int, int], str] = field(default_factory=dict)
    sampled: set[str] = field(default_factory=set)                    # native traces the score role must judge
    not_acked: int = 0                                                # produce calls the broker never acknowledged


@dataclass
class StoredTrace:
    rows: int               # rows with this trace id, read with FINAL (1 = stored once)
    incomplete: bool        # marked ragmon.otlp.incomplete
    answer: str
    source: str             # source_topic


@dataclass
class Stored:
    """The store after the last stop, read with FINAL by a fresh process (``collect.py``)."""

    traces: dict[str, StoredTrace] = field(default_factory=dict)
    scores: dict[tuple[str, str], dict[str, int]] = field(default_factory=dict)  # (trace, fingerprint) → metric → rows
    score_status: Counter[str] = field(default_factory=Counter)
    score_failed: dict[str, float] = field(default_factory=dict)                   # trace → when its failure was stored
    labels: dict[tuple[str, str], str] = field(default_factory=dict)              # (trace, reviewer) → note
    triage: dict[tuple[str, str, str], tuple[str, str]] = field(default_factory=dict)  # (week, trace, reviewer)
    outcomes: dict[str, int] = field(default_factory=dict)                         # event id → rows
    detached: list[str] = field(default_factory=list)                              # parts set aside by the engine


@dataclass
class DeadLetter:
    """One dead letter as read from a dead-letter topic or file."""

    topic: str              # the source topic (or otlp-http)
    partition: int
    offset: int
    reason: str
    trace_ids: tuple[str, ...] = ()  # OTLP trace ids the letter's value names


@dataclass
class SavedLabel:
    """A label the UI or API acknowledged (303 to the item, or 200 from the API)."""

    kind: str               # "review" or "triage"
    week: str
    trace_id: str
    reviewer: str
    note: str
    cause: str = ""
    at: float = 0.0


@dataclass
class Attempt:
    """One thing a person did: a read command, a page load, a sign-in or sign-out, a label save."""

    kind: str               # read | page | signin | signout | session_ended | label | triage
    what: str
    started: float
    ended: float
    ok: bool
    detail: str = ""
    status: int | None = None
    write: bool = False     # it writes (a label, a sign-out): may fail while a fault is injected


@dataclass
class Fault:
    kind: str               # judge_429 | judge_500 | sigterm | kill_9 | broker | disk
    started: float
    ended: float            # the fault was removed (or the process started again)
    recovered: float | None = None  # /readyz answered 200 again (judge faults: the first judge answer 200)
    note: str = ""

    @property
    def recovery_seconds(self) -> float | None:
        return None if self.recovered is None else max(0.0, self.recovered - self.ended)


@dataclass
class WriteFailure:
    at: float
    source: str             # daemon-log | daemon-log (read) | metrics | label | signout | triage
    detail: str


@dataclass
class Lifetime:
    """One run of `ragmon run`, from its start to its stop."""

    index: int
    started: float
    ready: float | None = None
    stopped: float | None = None
    how: str = ""           # sigterm | kill -9 | final
    exit_code: int | None = None
    final: dict[str, float] | None = None   # the counters it printed when it stopped ("ragmon run stopped: …")
    last_scrape: dict[str, float] = field(default_factory=dict)
    scraped_at: float | None = None
    log: str = ""           # path of its log file
    committed_before_kill: dict[int, int] = field(default_factory=dict)
    committed_after_kill: dict[int, int] = field(default_factory=dict)

    @property
    def counters(self) -> dict[str, float]:
        return self.final if self.final is not None else self.last_scrape


@dataclass
class TopicScan:
    """The traces topic as the broker holds it at the end (which OTLP traces reached Kafka through the Collector)."""

    messages: int = 0                    # distinct messages (offsets) in every partition
    native: int = 0
    otlp: int = 0
    otlp_trace_ids: set[str] = field(default_factory=set)


@dataclass
class Run:
    """Everything one scenario recorded and read back: the checkers' input."""

    sent: Sent = field(default_factory=Sent)
    stored: Stored = field(default_factory=Stored)
    letters: list[DeadLetter] = field(default_factory=list)
    outcome_letters: list[DeadLetter] = field(default_factory=list)
    labels: list[SavedLabel] = field(default_factory=list)
    attempts: list[Attempt] = field(default_factory=list)
    faults: list[Fault] = field(default_factory=list)
    failures: list[WriteFailure] = field(default_factory=list)
    lifetimes: list[Lifetime] = field(default_factory=list)
    topic: TopicScan = field(default_factory=TopicScan)
    fingerprint: str = ""
    started: float = 0.0
    ended: float = 0.0
    notes: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)
