"""Negative controls of the operations invariants (``tests/support/operations/invariants.py``): a small run where
every invariant holds, and the same run doctored once per way each can break — a trace dropped, one doubled, an
OTLP query stored without its root, an invalid message not dead-lettered, a trace counted twice or not at all, a
label deleted, a sampled trace without scores, a failing read command, a signed-out session still working,
readiness never returning, a write failure outside a fault window — each of which must fail exactly its check.
Pure and fast: no daemon (``test_operations.py`` runs the real one and damages its real store)."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

import pytest

from tests.support.operations import invariants
from tests.support.operations.records import (
    Attempt,
    DeadLetter,
    Fault,
    Lifetime,
    OtlpSent,
    Run,
    SavedLabel,
    Sent,
    Stored,
    StoredTrace,
    TopicScan,
    WriteFailure,
)

TOPIC = "ops.traces"
ACCOUNT = "consumed = stored + dead-lettered + skipped"
FP = "fp1"
ANSWER = "Refunds take five days."
METRICS = {"faithfulness": 1, "answer_relevance": 1}


def _counters(consumed: float, stored: float, letters: float = 0, skipped: float = 0,
              released: float = 0) -> dict[str, float]:
    def settled(outcome: str) -> str:
        return f'ragmon_ingest_traces_settled_total{{kind="message",outcome="{outcome}"}}'

    return {'ragmon_ingest_traces_consumed_total{kind="message"}': consumed, settled("stored"): stored,
            settled("dead_lettered"): letters, settled("skipped"): skipped, settled("released"): released}


def good_run() -> Run:
    """Four native traces (two sampled), a seed trace, two OTLP queries, one invalid message, two non-queries; one
    SIGTERM restart; every invariant holds."""
    native = {f"n{i}": f"q{i}" for i in range(4)}
    otlp = {"a" * 32: OtlpSent("a" * 32, "collector", "Q?", ANSWER, 125.0, 100.0, 226.0, 9, 9),
            "b" * 32: OtlpSent("b" * 32, "direct", "Q?", ANSWER, 0.5, 101.0, 102.0, 9, 9)}
    sent = Sent(native=native, invalid={(0, 7): "invalid_json"}, seed={"s0"}, otlp=otlp,
                non_queries={"c" * 32: "collector", "d" * 32: "direct"}, outcomes={"e1", "e2"},
                invalid_outcomes={(0, 3): "schema"}, sampled={"n0", "n1"})
    traces = {t: StoredTrace(1, False, ANSWER, TOPIC) for t in [*native, "s0", *otlp]}
    stored = Stored(traces=traces, scores={(t, FP): dict(METRICS) for t in ("n0", "n1")},
                    score_status=Counter({"ok": 4}), labels={("s0", "alice"): "second"},
                    triage={("2026-W48", "s0", "bob"): ("retrieval_miss", "t")}, outcomes={"e1": 1, "e2": 1})
    labels = [SavedLabel("review", "2026-W48", "s0", "alice", "first", at=1.0),
              SavedLabel("review", "2026-W48", "s0", "alice", "second", at=2.0),
              SavedLabel("triage", "2026-W48", "s0", "bob", "t", "retrieval_miss", at=3.0)]
    attempts = [Attempt("read", "ragmon store status", 10, 12, True),
                Attempt("page", "/review/", 10, 10.1, True, status=200),
                Attempt("signout", "sign-out", 20, 20.1, True, status=303, write=True),
                Attempt("session_ended", "cookie", 20.1, 20.2, True, status=303),
                Attempt("label", "review label (form)", 51, 51.1, False, status=503,
                        write=True)]  # during the disk fault
    faults = [Fault("disk", 50, 60, 70), Fault("sigterm", 100, 105, 110)]
    failures = [WriteFailure(55, "daemon-log", "store write failed"), WriteFailure(72, "metrics", "rose by 1")]
    # 9 given (4 native, 1 invalid, 2 queries, 2 non-queries); one trace still assembling at the SIGTERM is given
    # back (released) and taken in again by the second lifetime
    lifetimes = [Lifetime(0, 0, 1, 100, "sigterm", 0, final=_counters(7, stored=4, letters=1, skipped=1, released=1)),
                 Lifetime(1, 106, 110, 300, "final", 0, final=_counters(3, stored=2, skipped=1))]
    return Run(sent=sent, stored=stored, letters=[DeadLetter(TOPIC, 0, 7, "invalid_json")],
               outcome_letters=[DeadLetter("ops.outcomes", 0, 3, "schema")], labels=labels, attempts=attempts,
               faults=faults, failures=failures, lifetimes=lifetimes,
               topic=TopicScan(messages=6, native=5, otlp=1), fingerprint=FP, started=0, ended=300,
               extra={})


def _checks(run: Run) -> dict[str, invariants.Check]:
    return {c.name: c for c in invariants.check_all(run, traces_topic=TOPIC, recovery_bound_seconds=30)}


def _only_failing(run: Run) -> list[str]:
    return [name for name, c in _checks(run).items() if not c.ok]


def test_the_good_run_holds_every_invariant() -> None:
    checks = _checks(good_run())
    assert all(c.ok for c in checks.values()), {n: c.details for n, c in checks.items() if not c.ok}
    assert len(checks) == 9
    print(invariants.table(list(checks.values())))


def _stored(run: Run, **traces: StoredTrace | None) -> Run:
    new = dict(run.stored.traces)
    for t, s in traces.items():
        if s is None:
            new.pop(t)
        else:
            new[t] = s
    return replace(run, stored=replace(run.stored, traces=new))


ONCE = "every trace stored once or dead-lettered"


@pytest.mark.parametrize(("what", "doctor", "says"), [
    ("a native trace dropped", lambda r: _stored(r, n2=None), "1 traces sent and not stored ({'native': 1})"),
    ("a trace doubled", lambda r: _stored(r, n3=StoredTrace(2, False, ANSWER, TOPIC)),
     "1 traces stored more than once under FINAL, e.g. n3 ×2"),
    ("a slow OTLP query lost", lambda r: _stored(r, **{"a" * 32: None}), "collector LLM ≥ 60 s: 1"),
    ("an OTLP query stored without its root", lambda r: _stored(r, **{"b" * 32: StoredTrace(1, True, "", "otlp-http")}),
     "1 OTLP queries stored but not whole"),
    ("an invalid message not dead-lettered", lambda r: replace(r, letters=[]), "1 invalid messages not dead-lettered"),
    ("an invalid message dead-lettered for another reason",
     lambda r: replace(r, letters=[DeadLetter(TOPIC, 0, 7, "schema")]), "expected invalid_json, got schema"),
    ("a valid trace dead-lettered",
     lambda r: replace(r, letters=[*r.letters, DeadLetter(TOPIC, 1, 9, "schema", ("n1",))]),
     "1 valid traces dead-lettered"),
    ("a trace nobody sent", lambda r: _stored(r, x=StoredTrace(1, False, "", TOPIC)),
     "1 traces stored that nobody sent"),
])
def test_traces_once_fails(what: str, doctor, says: str) -> None:
    run = doctor(good_run())
    failing = _only_failing(run)
    assert ONCE in failing, what
    assert any(says in d for d in _checks(run)[ONCE].details), _checks(run)[ONCE].details


def _counted(run: Run, index: int, **counts: float) -> Run:
    lifetimes = list(run.lifetimes)
    old = lifetimes[index]
    base = {"consumed": 3, "stored": 2, "letters": 0, "skipped": 1, "released": 0} if index else \
        {"consumed": 7, "stored": 4, "letters": 1, "skipped": 1, "released": 1}
    lifetimes[index] = replace(old, final=_counters(**{**base, **counts}))
    return replace(run, lifetimes=lifetimes)


def test_accounting_fails_when_a_trace_taken_in_has_no_outcome() -> None:
    run = _counted(good_run(), 1, stored=1)  # consumed 3, outcomes 2
    assert _only_failing(run) == [ACCOUNT]
    assert "+1 traces without an outcome" in _checks(run)[ACCOUNT].details[0]


def test_accounting_fails_when_a_trace_vanishes_between_lifetimes() -> None:
    run = _counted(good_run(), 1, consumed=2, stored=1)  # each lifetime balances; the released trace never came back
    assert _only_failing(run) == [ACCOUNT]
    assert "1 fewer than the 9 given" in _checks(run)[ACCOUNT].details[0]


def test_accounting_fails_when_a_trace_is_counted_twice() -> None:
    run = _counted(good_run(), 1, stored=3)  # an outcome more than it took in
    assert _only_failing(run) == [ACCOUNT]
    details = _checks(run)[ACCOUNT].details
    assert "-1 traces without an outcome" in details[0] and "counted twice" in details[1], details


def test_accounting_fails_when_a_lifetime_did_not_report() -> None:
    run = good_run()
    run.lifetimes[0] = replace(run.lifetimes[0], final=None, last_scrape=run.lifetimes[0].final or {})
    assert _only_failing(run) == [ACCOUNT]


def test_labels_fail_when_one_is_missing_or_changed() -> None:
    run = good_run()
    gone = replace(run, stored=replace(run.stored, labels={}))
    assert _only_failing(gone) == ["every label saved is there"]
    older = replace(run, stored=replace(run.stored, labels={("s0", "alice"): "first"}))  # the newer save lost
    assert _only_failing(older) == ["every label saved is there"]
    triage = replace(run, stored=replace(run.stored, triage={("2026-W48", "s0", "bob"): ("other", "t")}))
    assert _only_failing(triage) == ["every label saved is there"]


@pytest.mark.parametrize(("what", "scores", "status"), [
    ("a sampled trace without scores", {("n0", FP): METRICS}, {"ok": 2}),
    ("a metric twice", {("n0", FP): METRICS, ("n1", FP): {"faithfulness": 2, "answer_relevance": 1}}, {"ok": 5}),
    ("a trace not sampled scored", {("n0", FP): METRICS, ("n1", FP): METRICS, ("n2", FP): METRICS}, {"ok": 6}),
    ("another fingerprint", {("n0", FP): METRICS, ("n1", FP): METRICS, ("n1", "fp2"): METRICS}, {"ok": 6}),
    ("a judgement failed while the judge worked", {("n0", FP): METRICS, ("n1", FP): METRICS}, {"ok": 2, "failed": 2}),
])
def test_scores_fail(what: str, scores, status) -> None:
    run = good_run()
    failed = {"n1": 150.0} if "failed" in status else {}  # no judge fault in the good run
    run = replace(run, stored=replace(run.stored, scores=scores, score_status=Counter(status), score_failed=failed))
    assert _only_failing(run) == ["every sampled trace has its scores once"], what


def test_a_judgement_failed_while_the_judge_failed_is_allowed() -> None:
    run = good_run()
    run.faults.append(Fault("judge_500", 140, 160, 161))
    run = replace(run,
                  stored=replace(run.stored, score_status=Counter({"ok": 2, "failed": 2}), score_failed={"n1": 170.0}))
    assert _only_failing(run) == []
    late = replace(run, stored=replace(run.stored, score_failed={"n1": 160 + invariants.JUDGE_RETRY_SECONDS + 1}))
    assert _only_failing(late) == ["every sampled trace has its scores once"]


def test_a_failing_read_command_fails() -> None:
    run = good_run()
    run.attempts.append(Attempt("read", "ragmon drift report", 30, 31, False, "exit 3: in use"))
    assert _only_failing(run) == ["every read command succeeded"]


def test_a_read_command_a_restart_interrupted_is_not_a_failure() -> None:
    run = good_run()  # the SIGTERM restart: 100 to 110
    run.attempts.append(Attempt("read", "ragmon drift backtest --from 14d", 95, 103, False, "exit 3: did not answer"))
    assert _only_failing(run) == []
    assert "1 interrupted by a restart" in _checks(run)["every read command succeeded"].summary


def test_a_read_that_fails_while_the_disk_is_full_is_counted_apart_and_only_then() -> None:
    """The embedded engine can fail reads of a table while a merge part the full disk broke waits for room to be
    detached (docs/status.md): such reads and 503 pages are counted apart, inside the disk fault's window only."""
    run = good_run()  # the disk fault: 50 to 70
    run.attempts.append(Attempt("read", "ragmon drift check --all", 55, 57, False, "exit 3: Cannot read all data"))
    run.attempts.append(Attempt("page", "/review/console/traces", 58, 58.1, False, status=503))
    assert _only_failing(run) == []
    assert "1 failed while the store's disk was full" in _checks(run)["every read command succeeded"].summary
    assert "1 pages answered 503" in _checks(run)["pages load, sign-out ends the session"].summary
    run = good_run()  # the same outside the window: failures
    run.attempts.append(Attempt("read", "ragmon drift check --all", 300, 301, False, "exit 3: Cannot read all data"))
    run.attempts.append(Attempt("page", "/review/console/traces", 300, 300.1, False, status=503))
    assert _only_failing(run) == ["every read command succeeded", "pages load, sign-out ends the session"]
    run = good_run()  # a page error other than 503 during the disk fault is still a failure
    run.attempts.append(Attempt("page", "/review/console/traces", 58, 58.1, False, status=500))
    assert _only_failing(run) == ["pages load, sign-out ends the session"]


def test_people_fail_on_a_page_error_or_a_session_that_survives_sign_out() -> None:
    run = good_run()
    run.attempts.append(Attempt("page", "/review/console/drift", 30, 31, False, status=500))
    assert _only_failing(run) == ["pages load, sign-out ends the session"]
    run = good_run()
    run.attempts[3] = replace(run.attempts[3], ok=False, status=200)
    assert _only_failing(run) == ["pages load, sign-out ends the session"]
    run = good_run()  # a write refused outside any fault window
    run.attempts.append(Attempt("label", "review label (form)", 200, 200.1, False, status=503, write=True))
    assert _only_failing(run) == ["pages load, sign-out ends the session"]


def test_readiness_fails_when_it_never_returns_or_returns_late() -> None:
    run = good_run()
    run.faults[1] = replace(run.faults[1], recovered=None)
    assert _only_failing(run) == ["/readyz back within 30s of each fault"]
    run = good_run()
    run.faults[1] = replace(run.faults[1], recovered=150)
    assert _only_failing(run) == ["/readyz back within 30s of each fault"]


def test_a_write_failure_outside_a_fault_window_fails() -> None:
    run = good_run()
    run.failures.append(WriteFailure(90, "daemon-log", "store write failed"))  # between the disk and the sigterm
    assert _only_failing(run) == ["no write or store read failed outside a fault"]
    run = good_run()
    run.failures.append(WriteFailure(90, "daemon-log (read)", "drift check failed: ClickHouse query failed"))
    assert _only_failing(run) == ["no write or store read failed outside a fault"]


def test_outcome_events_lost_or_not_dead_lettered_fail() -> None:
    run = good_run()
    lost = replace(run, stored=replace(run.stored, outcomes={"e1": 1}))
    assert _only_failing(lost) == ["every outcome event stored once"]
    assert _only_failing(replace(run, outcome_letters=[])) == ["every outcome event stored once"]
