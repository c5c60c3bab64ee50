"""The invariants of the whole daemon under operations, as pure functions of what the harness recorded (``Run``).

Each checker returns a ``Check``: held or not, one summary line, and the lines that say what broke. They read
records only (no I/O, no clock), so a negative control hands them doctored records and sees each one fail
(``tests/system/test_invariant_checkers.py``). ``table`` prints them for a human.

The invariants (issue 30):

1. ``traces_once`` — every trace sent is stored exactly once (rows under FINAL), an OTLP query whole (not marked
   incomplete, the answer the application got), or — an invalid message — dead-lettered with its reason.
2. ``accounting`` — the daemon's own counters (``ragmon_ingest_traces_consumed_total`` and
   ``ragmon_ingest_traces_settled_total{outcome}``; each lifetime's from its stop line, after a kill -9 its last
   scrape): every lifetime that stopped cleanly balances exactly, consumed = stored + dead-lettered + skipped +
   released (given back uncommitted, read again next time); over the run the final outcomes cover every trace
   given, and exceed them by no more than the traces read again after a kill -9.
3. ``labels`` — every label the UI or API acknowledged is in the store (the newest per reviewer and trace).
4. ``scores`` — every sampled trace has its scores once: one row per metric for the judge fingerprint under FINAL,
   and no trace that was not sampled has any; a judgement may be recorded as failed only while the judge failed.
5. ``reads`` — every runbook read command run while the daemon was up succeeded (one a restart interrupted is
   counted apart).
6. ``people`` — every page load answered, sign-in worked, sign-out ended the session (a copied cookie is refused);
   a write (label, sign-out) may fail only while a fault was injected.
7. ``readiness`` — /readyz came back within the stated bound after every fault.
8. ``writes`` — no write failed (daemon log, its failure counters, a client's refused write) outside a fault window;
   nor a read of the store by one of the daemon's roles (its log): reads must work whenever the daemon runs.
9. ``outcomes`` — every outcome event is stored once, every invalid one dead-lettered.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from tests.support.operations.records import Attempt, Fault, Run, SavedLabel

#: a write failure seen at most this long after its fault window still belongs to it (log and scrape timing)
GRACE_SECONDS = 3.0
#: lines printed per broken invariant
MAX_DETAILS = 12
#: a judgement may still fail this long after the judge's fault ended: the retries of a call begun during it
#: (judge.max_attempts with backoff up to judge.backoff_max_seconds, in two rounds: score.judge_attempts)
JUDGE_RETRY_SECONDS = 60.0


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    summary: str
    details: tuple[str, ...] = field(default_factory=tuple)


def _check(name: str, problems: list[str], summary: str) -> Check:
    return Check(name, not problems, summary, tuple(problems))


def _few(items: Iterable[object], n: int = 3) -> str:
    items = sorted(items, key=str)
    return ", ".join(map(str, items[:n])) + (f" (+{len(items) - n} more)" if len(items) > n else "")


# -- 1. every trace stored exactly once, or dead-lettered with its reason ------------------------------------------

def traces_once(run: Run) -> Check:
    sent, stored = run.sent, run.stored.traces
    problems: list[str] = []
    native_seed = set(sent.native) | sent.seed
    whole = {t for t, o in sent.otlp.items() if o.whole}
    partial = {t for t, o in sent.otlp.items() if 0 < o.accepted < o.spans}
    lettered_ids = {t for d in run.letters for t in d.trace_ids}
    missing = {t for t in native_seed | whole if t not in stored}
    doubled = {t: s.rows for t, s in stored.items() if s.rows > 1}
    if missing:
        by_kind = Counter("native" if t in sent.native else "seed" if t in sent.seed else
                          f"otlp {sent.otlp[t].path}" for t in missing)
        problems.append(f"{len(missing)} traces sent and not stored ({dict(by_kind)}), e.g. {_few(missing)}")
        lost_native = sorted(t for t in missing if t in sent.native)
        if len(lost_native) > 3:
            problems.append(f"  the native ones run from {lost_native[0]} to {lost_native[-1]}")
        if run.stored.detached:
            problems.append(f"  parts the engine detached (their rows are not read): {_few(run.stored.detached, 5)}")
        lost_otlp = [sent.otlp[t] for t in missing if t in sent.otlp]
        if lost_otlp:
            kills = [f.started for f in run.faults if f.kind == "kill_9"]
            buckets = Counter((o.path, "LLM < 10 s" if o.llm_seconds < 10 else "LLM 10–60 s" if o.llm_seconds < 60
                               else "LLM ≥ 60 s") for o in lost_otlp)
            near_kill = sum(1 for o in lost_otlp if o.llm_seconds < 10 and any(k - 15 <= o.ended <= k for k in kills))
            in_kafka = sum(1 for o in lost_otlp if o.path == "collector" and o.trace_id in run.topic.otlp_trace_ids)
            via = sum(1 for o in lost_otlp if o.path == "collector")
            problems.append("  the OTLP ones by path and LLM call: " + ", ".join(
                f"{p} {b}: {n}" for (p, b), n in sorted(buckets.items())) +
                f"; of the short ones, {near_kill} ended in the 15 s before a kill -9; of the {via} through the "
                f"Collector, {in_kafka} have spans in the topic")
    if doubled:
        problems.append(f"{len(doubled)} traces stored more than once under FINAL, e.g. "
                        f"{_few(f'{t} ×{n}' for t, n in doubled.items())}")
    not_whole = {t for t in whole if t in stored and (stored[t].incomplete or stored[t].answer != sent.otlp[t].answer)}
    if not_whole:
        problems.append(f"{len(not_whole)} OTLP queries stored but not whole (marked incomplete or another answer), "
                        "e.g. "
                        f"{_few(f'{t} ({sent.otlp[t].path}, LLM {sent.otlp[t].llm_seconds:.0f}s)' for t in not_whole)}")
    lost_partial = {t for t in partial if t not in stored and t not in lettered_ids}
    if lost_partial:
        problems.append(f"{len(lost_partial)} OTLP traces partly delivered neither stored nor dead-lettered, e.g. "
                        f"{_few(lost_partial)}")
    letters = {(d.partition, d.offset): d.reason for d in run.letters if d.topic not in ("otlp-http",)}
    no_letter = {po for po in sent.invalid if po not in letters}
    wrong = {po: (sent.invalid[po], letters[po])
             for po in sent.invalid if po in letters and letters[po] != sent.invalid[po]}
    if no_letter:
        problems.append(f"{len(no_letter)} invalid messages not dead-lettered, e.g. at (partition, offset) "
                        f"{_few(no_letter)}")
    if wrong:
        problems.append(f"{len(wrong)} invalid messages dead-lettered with another reason, e.g. "
                        f"{_few(f'{po}: expected {a}, got {b}' for po, (a, b) in wrong.items())}")
    valid_lettered = lettered_ids & (native_seed | whole)
    if valid_lettered:
        problems.append(f"{len(valid_lettered)} valid traces dead-lettered, e.g. {_few(valid_lettered)}")
    expected = native_seed | set(sent.otlp)
    extra = set(stored) - expected
    if extra:
        problems.append(f"{len(extra)} traces stored that nobody sent as a query, e.g. {_few(extra)}")
    slow_whole = sum(1 for t in whole if sent.otlp[t].llm_seconds >= 120)
    paths = Counter(o.path for t, o in sent.otlp.items() if t in whole)
    summary = (f"{len(sent.native):,} native + {len(sent.seed):,} seed + {len(whole):,} OTLP queries "
               f"({', '.join(f'{p} {n}' for p, n in sorted(paths.items()))}; {slow_whole} with LLM calls ≥ 2 min): "
               f"{len(native_seed | whole) - len(missing):,} stored, {len(missing):,} missing, {len(doubled):,} "
               "doubled; "
               f"{len(sent.invalid) - len(no_letter)}/{len(sent.invalid)} invalid dead-lettered with their reason")
    return _check("every trace stored once or dead-lettered", problems, summary)


# -- 2. the daemon's counters account for every trace ---------------------------------------------------------------

def _sum(counters: dict[str, float], name: str, *, labels: str = "") -> float:
    """The sum of a counter's series whose label text contains ``labels``."""
    pattern = re.compile(rf"^{re.escape(name)}(?:\{{(.*)\}})?$")
    return sum(v for k, v in counters.items() if (m := pattern.match(k)) and labels in (m.group(1) or ""))


OUTCOMES = ("stored", "dead_lettered", "skipped", "released")


def life_counts(counters: dict[str, float], traces_topic: str) -> dict[str, float]:
    """What one lifetime's counters say it did: traces taken in and how each ended
    (``ragmon_ingest_traces_consumed_total``, ``ragmon_ingest_traces_settled_total{outcome}``), messages read."""
    out = {"consumed": _sum(counters, "ragmon_ingest_traces_consumed_total")}
    for outcome in OUTCOMES:
        out[outcome] = _sum(counters, "ragmon_ingest_traces_settled_total", labels=f'outcome="{outcome}"')
    out.update({
        "kafka": _sum(counters, "ragmon_ingest_messages_consumed_total", labels=f'topic="{traces_topic}"'),
        "http": _sum(counters, "ragmon_ingest_messages_consumed_total", labels='topic="otlp-http"'),
        "repaired": _sum(counters, "ragmon_ingest_otlp_repaired_traces_total"),
        "scored": _sum(counters, "ragmon_score_traces_scored_total"),
    })
    return out


def lifetime_rows(run: Run, traces_topic: str) -> list[str]:
    """One line per lifetime with its counters, for the report."""
    out = []
    for life in run.lifetimes:
        n = life_counts(life.counters, traces_topic)
        lasted = (life.stopped or run.ended) - life.started
        out.append(f"lifetime {life.index}: {life.how or 'running'} after {lasted:.0f}s (exit {life.exit_code}; "
                   f"{'its stop line' if life.final is not None else 'its last scrape'}): traces consumed "
                   f"{n['consumed']:,.0f} = stored {n['stored']:,.0f} + dead-lettered {n['dead_lettered']:,.0f} + "
                   f"skipped {n['skipped']:,.0f} + released {n['released']:,.0f}"
                   f"{'' if life.final is not None else ' + open at the kill'} (messages read: {n['kafka']:,.0f} "
                   f"from Kafka, {n['http']:,.0f} OTLP/HTTP requests; repaired {n['repaired']:,.0f}; scored "
                   f"{n['scored']:,.0f})")
    return out


def accounting(run: Run, traces_topic: str) -> Check:
    """Per lifetime that stopped cleanly: consumed = stored + dead-lettered + skipped + released, exactly (released:
    given back uncommitted at the stop, read again by the next). After a kill -9, what was open is not counted, so
    consumed ≥ the rest. Over the run: the final outcomes (stored, dead-lettered, skipped) of all lifetimes cover
    the traces given, and exceed them by no more than the re-reads (traces consumed again after a kill -9 that
    were not given back) explain."""
    sent, problems = run.sent, []
    queries = sum(1 for o in sent.otlp.values() if o.accepted > 0)
    given = len(sent.native) + len(sent.invalid) + queries + len(sent.non_queries)
    final = consumed = released = 0.0
    slack_low = 0
    for life in run.lifetimes:
        n = life_counts(life.counters, traces_topic)
        settled = sum(n[o] for o in OUTCOMES)
        final += n["stored"] + n["dead_lettered"] + n["skipped"]
        consumed += n["consumed"]
        released += n["released"]
        ends = (f"{n['consumed']:,.0f} consumed, {n['stored']:,.0f} stored + {n['dead_lettered']:,.0f} dead-lettered "
                f"+ {n['skipped']:,.0f} skipped + {n['released']:,.0f} released")
        if life.final is not None and settled != n["consumed"]:
            problems.append(f"lifetime {life.index} ({life.how}) stopped with {ends} = {settled:,.0f}: "
                            f"{n['consumed'] - settled:+,.0f} traces without an outcome")
        elif life.final is None and life.how == "kill -9":
            if settled > n["consumed"]:
                problems.append(f"lifetime {life.index} (kill -9), last scrape: {ends}: more outcomes than traces")
            # settled and committed between the last scrape and the kill: counted nowhere
            slack_low += sum(max(0, life.committed_after_kill.get(p, 0) - o)
                             for p, o in life.committed_before_kill.items())
        elif life.final is None:
            problems.append(f"lifetime {life.index} ({life.how}) printed no final counters: its account is incomplete")
    reread = max(0.0, consumed - released - given)
    excess = final - given
    if excess < -slack_low:
        problems.append(f"the final outcomes of all lifetimes account for {final:,.0f} traces, {given - final:,.0f} "
                        "fewer "
                        f"than the {given:,} given: traces vanished without an outcome"
                        + (f" (beyond {slack_low} committed between the last scrape and the kill -9)"
                           if slack_low else ""))
    if excess > reread:
        problems.append(f"the final outcomes of all lifetimes account for {final:,.0f} traces, {excess:,.0f} more than "
                        f"the {given:,} given, more than the {reread:,.0f} read again after a kill explain: some "
                        f"traces were counted twice")
    if problems:
        problems.extend("  " + row for row in lifetime_rows(run, traces_topic))
    clean = sum(1 for life in run.lifetimes if life.final is not None)
    summary = (f"{clean} clean lifetimes balanced exactly; over the run {given:,} traces given ({len(sent.native):,} "
               f"native, {len(sent.invalid)} invalid, {queries:,} OTLP queries, {len(sent.non_queries)} OTLP "
               f"non-queries), {final:,.0f} final outcomes (excess {excess:+,.0f}; {reread:,.0f} read again after "
               f"the kill allow 0…{reread:,.0f})")
    return Check("consumed = stored + dead-lettered + skipped", not problems, summary, tuple(problems))


# -- 3. labels ------------------------------------------------------------------------------------------------------

def labels(run: Run) -> Check:
    newest: dict[tuple[str, ...], SavedLabel] = {}
    for label in sorted(run.labels, key=lambda x: x.at):
        key = (label.kind, label.week, label.trace_id, label.reviewer)
        newest[key] = label
    problems = []
    for (kind, week, trace_id, reviewer), label in newest.items():
        if kind == "review":
            got = run.stored.labels.get((trace_id, reviewer))
            if got != label.note:
                problems.append(f"review label of {reviewer} on {trace_id}: saved note {label.note!r}, "
                                f"stored {got!r}")
        else:
            got_t = run.stored.triage.get((week, trace_id, reviewer))
            if got_t != (label.cause, label.note):
                problems.append(f"triage label of {reviewer} on {trace_id}: saved {(label.cause, label.note)}, "
                                f"stored {got_t}")
    kinds = Counter(k[0] for k in newest)
    summary = (f"{len(run.labels)} saves acknowledged ({kinds.get('review', 0)} review, {kinds.get('triage', 0)} "
               "triage "
               f"labels after overwrites): {len(newest) - len(problems)} stored as saved, {len(problems)} not")
    return _check("every label saved is there", problems, summary)


# -- 4. scores ------------------------------------------------------------------------------------------------------

def scores(run: Run) -> Check:
    sampled, fp = run.sent.sampled, run.fingerprint
    got = run.stored.scores
    problems = []
    fingerprints = {f for _, f in got}
    if fp and fingerprints - {fp}:
        problems.append(f"scores of other fingerprints: {_few(fingerprints - {fp})}")
    missing = {t for t in sampled if (t, fp) not in got}
    twice = {t: m for (t, f), metrics in got.items() for m, n in metrics.items() if n > 1}
    metric_sets = Counter(frozenset(m) for (t, f), m in got.items() if t in sampled)
    unsampled = {t for (t, _) in got if t not in sampled}
    if missing:
        problems.append(f"{len(missing)} sampled traces without scores, e.g. {_few(missing)}")
    if twice:
        problems.append(f"{len(twice)} traces with a metric scored more than once under FINAL, e.g. "
                        f"{_few(f'{t}: {m}' for t, m in twice.items())}")
    if len(metric_sets) > 1:
        problems.append(f"sampled traces have different metric sets: {[sorted(s) for s in metric_sets]}")
    if unsampled:
        problems.append(f"{len(unsampled)} traces scored that the sampler did not pick, e.g. {_few(unsampled)}")
    judge_down = [(f.started, f.ended + JUDGE_RETRY_SECONDS) for f in run.faults if f.kind.startswith("judge")]
    failed = run.stored.score_failed
    unexplained = {t: at for t, at in failed.items() if not any(a <= at <= b for a, b in judge_down)}
    if unexplained:
        problems.append(f"{len(unexplained)} traces recorded as failed by the judge while it was not failing, e.g. "
                        f"{_few(f'{t} at {at:.0f}' for t, at in unexplained.items())}")
    summary = (f"{len(sampled):,} sampled native traces: {len(sampled) - len(missing):,} scored once "
               f"({sum(metric_sets.values()) and len(next(iter(metric_sets)))} metrics each, fingerprint {fp or '?'}), "
               f"{len(missing)} missing, {len(twice)} twice; {len(failed)} recorded as failed while the judge failed "
               f"({len(unexplained)} otherwise); rows by status {dict(run.stored.score_status)}")
    return _check("every sampled trace has its scores once", problems, summary)


# -- 5. read commands -----------------------------------------------------------------------------------------------

def interrupted_reads(run: Run) -> list[Attempt]:
    """The read commands that failed while a restart of the daemon was under way (stopped, or not ready yet)."""
    restarts = [(f.started, f.recovered if f.recovered is not None else f.ended)
                for f in run.faults if f.kind in ("sigterm", "kill_9")]
    return [a for a in run.attempts if a.kind == "read" and not a.ok
            and any(a.started <= b and a.ended >= s for s, b in restarts)]


def disk_full_windows(run: Run) -> list[tuple[float, float]]:
    """[injected, recovered] of the full-disk faults: the embedded engine can fail reads of a table while a merge
    part the full disk broke waits for room to be detached (docs/operations.md, "The disk"; docs/status.md)."""
    return [(f.started, f.recovered if f.recovered is not None else f.ended) for f in run.faults if f.kind == "disk"]


def refused_while_disk_full(run: Run, a: Attempt) -> bool:
    """A read that failed on the store while its disk was full: counted apart, as the documented limit it is."""
    windows = disk_full_windows(run)
    return not a.ok and (in_window(a.started, windows) or in_window(a.ended, windows))


def reads(run: Run) -> Check:
    """Every read command succeeded, but for one that a restart of the daemon interrupted (it ran while the daemon
    was stopped or not ready yet), or that failed on the store while its disk was full: those are counted apart."""
    ran = [a for a in run.attempts if a.kind == "read"]
    interrupted = interrupted_reads(run)
    disk_full = [a for a in ran if a not in interrupted and refused_while_disk_full(run, a)]
    failed = [a for a in ran if not a.ok and a not in interrupted and a not in disk_full]
    problems = [f"`{a.what}` failed at {a.started:.0f} ({a.ended - a.started:.1f}s): {a.detail}" for a in failed]
    if not ran:
        problems.append("no read command ran")
    distinct = len({a.what for a in ran})
    ok = len(ran) - len(failed) - len(interrupted) - len(disk_full)
    summary = (f"{len(ran)} runs of {distinct} runbook read commands: {ok} succeeded, {len(interrupted)} interrupted "
               f"by a restart" + (f", {len(disk_full)} failed while the store's disk was full" if disk_full else ""))
    return _check("every read command succeeded", problems, summary)


# -- 6. people: pages, sign-in, sign-out ------------------------------------------------------------------------------

def in_window(t: float, windows: list[tuple[float, float]]) -> bool:
    return any(a <= t <= b + GRACE_SECONDS for a, b in windows)


def fault_windows(run: Run) -> list[tuple[float, float]]:
    """[injected, recovered] of every fault (until it was removed when it never recovered)."""
    return [(f.started, f.recovered if f.recovered is not None else f.ended) for f in run.faults]


def people(run: Run) -> Check:
    windows = fault_windows(run)
    acts = [a for a in run.attempts if a.kind != "read"]
    problems = []
    for a in acts:
        if a.ok:
            continue
        if a.write and (in_window(a.started, windows) or in_window(a.ended, windows)):
            continue  # a write refused while a fault was injected: allowed (the person tries again)
        if a.status == 503 and refused_while_disk_full(run, a):
            continue  # a page the store could not read while its disk was full: 503 "try again", counted apart
        problems.append(f"{a.kind} {a.what} at {a.started:.0f}: {a.detail or a.status}")
    kinds = Counter(a.kind for a in acts)
    refused = sum(1 for a in acts if not a.ok and a.write)
    unread = sum(1 for a in acts if not a.ok and not a.write and a.status == 503 and refused_while_disk_full(run, a))
    summary = (f"{len(acts)} actions ({', '.join(f'{k} {n}' for k, n in sorted(kinds.items()))}): "
               f"{len(acts) - len(problems)} as expected ({refused} writes refused during a fault"
               + (f", {unread} pages answered 503 while the store's disk was full" if unread else "") + ")")
    if not kinds.get("session_ended"):
        problems.append("no sign-out was followed by a check that the old cookie is refused")
    return _check("pages load, sign-out ends the session", problems, summary)


# -- 7. readiness after each fault -------------------------------------------------------------------------------

def readiness(run: Run, bound_seconds: float) -> Check:
    problems, parts = [], []
    for f in run.faults:
        took = f.recovery_seconds
        parts.append(f"{f.kind} {'never' if took is None else f'{took:.1f}s'}")
        if took is None:
            problems.append(f"{f.kind} (injected at {f.started:.0f}, removed at {f.ended:.0f}): never recovered")
        elif took > bound_seconds:
            problems.append(f"{f.kind}: recovered {took:.1f}s after it was removed, over {bound_seconds:.0f}s")
    if not run.faults:
        problems.append("no fault was injected")
    return _check(f"/readyz back within {bound_seconds:.0f}s of each fault", problems, "; ".join(parts))


# -- 8. writes fail only during faults -------------------------------------------------------------------------------

def writes(run: Run) -> Check:
    windows = fault_windows(run)
    outside = [w for w in run.failures if not in_window(w.at, windows)]
    problems = [f"{w.source} at {w.at:.1f}: {w.detail[:240]}" for w in outside]
    by_source = Counter(w.source for w in run.failures)
    summary = (f"{len(run.failures)} write failures seen ({', '.join(f'{k} {n}' for k, n in sorted(by_source.items()))}"
               f"), {len(outside)} outside the {len(windows)} fault windows")
    return _check("no write or store read failed outside a fault", problems, summary)


# -- 9. outcome events -------------------------------------------------------------------------------------------------

def outcomes(run: Run) -> Check:
    sent, stored = run.sent, run.stored.outcomes
    missing = sent.outcomes - set(stored)
    doubled = {e: n for e, n in stored.items() if n > 1}
    letters = {(d.partition, d.offset): d.reason for d in run.outcome_letters}
    no_letter = {po for po in sent.invalid_outcomes if po not in letters}
    problems = []
    if missing:
        problems.append(f"{len(missing)} outcome events not stored, e.g. {_few(missing)}")
    if doubled:
        problems.append(f"{len(doubled)} outcome events stored more than once, e.g. {_few(doubled)}")
    if no_letter:
        problems.append(f"{len(no_letter)} invalid outcome events not dead-lettered, e.g. {_few(no_letter)}")
    summary = (f"{len(sent.outcomes):,} events: {len(sent.outcomes) - len(missing):,} stored once; "
               f"{len(sent.invalid_outcomes) - len(no_letter)}/{len(sent.invalid_outcomes)} invalid dead-lettered")
    return _check("every outcome event stored once", problems, summary)


# -- all of them ------------------------------------------------------------------------------------------------------

def check_all(run: Run, *, traces_topic: str, recovery_bound_seconds: float) -> list[Check]:
    return [traces_once(run), accounting(run, traces_topic), labels(run), scores(run), reads(run), people(run),
            readiness(run, recovery_bound_seconds), writes(run), outcomes(run)]


def table(checks: list[Check]) -> str:
    """The invariants as a human reads them: one line each, then what broke."""
    width = max(len(c.name) for c in checks)
    lines = [f"{'held' if c.ok else 'FAILED':6}  {c.name:<{width}}  {c.summary}" for c in checks]
    for c in checks:
        if not c.ok:
            lines.append(f"-- {c.name}:")
            lines.extend(f"   {d}" for d in c.details[:MAX_DETAILS])
            if len(c.details) > MAX_DETAILS:
                lines.append(f"   … {len(c.details) - MAX_DETAILS} more")
    return "\n".join(lines)


def fault_rows(faults: list[Fault], origin: float) -> list[str]:
    """One line per fault: when, how long, how long until ready again."""
    return [f"{f.kind:<10} at +{f.started - origin:6.1f}s for {f.ended - f.started:5.1f}s; "
            f"ready again {'never' if f.recovery_seconds is None else f'{f.recovery_seconds:.1f}s'} after"
            + (f" ({f.note})" if f.note else "") for f in faults]


def failed_attempts(attempts: list[Attempt]) -> list[Attempt]:
    return [a for a in attempts if not a.ok]
