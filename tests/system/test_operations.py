"""The whole daemon under operations (issue 30): nothing lost while on-call reads, reviewers label, LLMs are slow
and processes restart.

``ragmon run`` with every role (Kafka ingest, OTLP/HTTP, outcomes, score with an OpenAI-compatible judge, drift,
shadow, review with the console, the read API) on a broker of its own and the embedded store, for a few minutes
of traffic (native traces from batching, compressing producers; the real LlamaIndex instrumentation through the
real Collector into Kafka and straight to /v1/traces, two queries per path with LLM calls over two minutes;
outcome events), people (every runbook read command in a loop, reviewers signing in and out and labelling
through the forms and the API) and faults (the judge answering 429 then 500, SIGTERM and restart, kill -9 and
restart, the broker restarted, the store's disk full). The harness is ``tests/support/operations`` (shared with
``bench/operations.py``, the 30-minute version); it prints the faults with their recovery times, the daemon's
lifetimes and the invariants as a table. About 6 minutes on the 2-core CI machine.

The negative controls: ``test_invariant_checkers.py`` hands every checker doctored records; here the stopped
store is damaged for real (a trace deleted, one stored twice, a label deleted) and the same checks must name
exactly that damage.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.support.missing import missing
from tests.support.operations import invariants
from tests.support.operations.scenario import Outcome, Unavailable, ci_plan, run_scenario, summary_line

pytestmark = [pytest.mark.system, pytest.mark.kafka, pytest.mark.collector, pytest.mark.timeout(1500)]


@pytest.fixture(scope="module")
def outcome(tmp_path_factory: pytest.TempPathFactory) -> Outcome:
    if shutil.which("java") is None:
        missing("Java is needed to run a broker of the test's own (scripts/setup-system installs it)")
    try:
        result = run_scenario(ci_plan(), Path(tmp_path_factory.mktemp("operations")), damage=True)
    except Unavailable as exc:
        missing(str(exc))
    print(result.report)
    print(summary_line(result))
    return result


def test_every_invariant_holds_under_operations(outcome: Outcome) -> None:
    assert outcome.ok, "\n" + invariants.table(outcome.checks)


def test_the_faults_and_the_slow_queries_really_happened(outcome: Outcome) -> None:
    """The invariants mean something only if what they survived happened: each fault took effect, and the slow
    queries were in flight across the restarts."""
    run = outcome.run
    kinds = [f.kind for f in run.faults]
    assert sorted(kinds) == sorted(["judge_429", "sigterm", "broker", "disk", "kill_9", "judge_500"]), kinds
    judge = run.extra["judge"]
    assert judge.get(429, 0) > 0 and judge.get(500, 0) > 0, judge
    stops = {life.how: life.exit_code for life in run.lifetimes}
    assert stops == {"sigterm": 0, "kill -9": -9, "final": 0}, stops
    disk = next(f for f in run.faults if f.kind == "disk")
    assert any(disk.started <= w.at <= (disk.recovered or disk.ended) and w.source == "daemon-log"
               for w in run.failures), "the full disk made no write fail"
    broker = next(f for f in run.faults if f.kind == "broker")
    assert "→" in broker.note and broker.note.split("broker pid ")[1].split(" → ")[0] != \
        broker.note.split(" → ")[1].split(";")[0], broker.note
    for path in ("collector", "direct"):
        slow = [o for o in run.sent.otlp.values() if o.path == path and o.llm_seconds >= 120]
        restarts = [f for f in run.faults if f.kind in ("sigterm", "kill_9")]
        assert len(slow) >= 2, f"{path}: {len(slow)} queries with an LLM call of two minutes or more"
        assert all(any(o.started < f.started < o.ended for f in restarts) for o in slow), \
            f"{path}: a slow query did not span a restart"
    assert {a.kind for a in run.attempts} >= {"read", "page", "signin", "signout", "session_ended", "label", "triage"}


def test_damage_to_the_store_is_caught(outcome: Outcome) -> None:
    """The real negative control: after the run, one stored trace is deleted, another stored a second time under
    another sort key (FINAL keeps both) and a review label is deleted, in the real store; the checks see exactly
    that."""
    damage = outcome.negative
    assert "checks" in damage, damage
    assert all(c.ok for c in damage["before"]), [c.details for c in damage["before"]]
    traces, labels = damage["checks"]
    assert not traces.ok and not labels.ok
    text = "\n".join(traces.details)
    assert f"1 traces sent and not stored ({{'native': 1}}), e.g. {damage['delete']}" in text, text
    assert f"1 traces stored more than once under FINAL, e.g. {damage['double']} ×2" in text, text
    trace_id, reviewer = damage["unlabel"]
    assert len(labels.details) == 1 and f"of {reviewer} on {trace_id}" in labels.details[0], labels.details
