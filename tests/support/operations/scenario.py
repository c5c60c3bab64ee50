"""The operations scenario: the whole daemon (``ragmon run``, every role) under traffic, people and faults.

One harness for the CI test (``tests/system/test_operations.py``, ``ci_plan``: a few minutes) and the long
benchmark (``bench/operations.py``, ``long_plan``: 30 minutes or more); the ``Plan`` holds the scenario's length,
rates and fault schedule. ``run_scenario(plan, workdir)`` sets up, runs, drains, reads back and checks, and
returns an ``Outcome`` (the records, the checks, the report a human reads). It cleans up every process it
started — the broker, the Collector, the daemon, the applications, the judge server — and unmounts the store's
tmpfs, also when something fails on the way.

What runs (all on loopback, in ``workdir``):

- a Kafka broker of its own through ``scripts/kafka-broker`` (free ports, its state in ``workdir/kafka``), with
  the traces topic (3 partitions), the outcomes topic and both dead-letter topics;
- the judge: ``judge.Judge``, an OpenAI-compatible endpoint (the project's local test server);
- the store: embedded chDB in ``workdir/disk/chdb``, on a tmpfs of its own so that it can be filled
  (``disk.Disk``); before the daemon starts, last week's traffic (some of it thumbs-down) is loaded with
  ``ragmon ingest --file`` and its review sample and triage queue are selected (``ragmon review select``,
  ``ragmon review triage``), so reviewers have work;
- ``ragmon run`` with ingest, OTLP/HTTP, outcomes, score (the OpenAI-compatible judge), drift, shadow and review
  (with the console), two reviewers configured (scrypt password hashes and API token digests);
- the real OpenTelemetry Collector (``scripts/otel-collector``) configured as docs/otlp.md says, into the topic;
- traffic (``traffic.py``): native traces from batching, compressing producers; outcome events; two instrumented
  LlamaIndex applications (``rag_app.py``), one exporting to the Collector, one to ``/v1/traces``, with LLM
  calls from 100 ms to minutes;
- people (``people.py``): every runbook read command in a loop, two reviewers in the web UI and its API;
- faults (``Plan.faults``): the judge answering 429 or 500 for a while, SIGTERM and restart, ``kill -9`` and
  restart, the broker restarted on its data, the store's disk full for a while.

At the end: the producers' last acknowledgements, the applications' last exports, the people stop, the Collector
is stopped (it flushes), the daemon drains (every consumer group committed up to the log end) and is stopped with
SIGTERM; then the store is read with FINAL by a fresh process, the dead letters and the topic are read, and the
invariants (``invariants.py``) are checked.
"""

from __future__ import annotations

import copy
import json
import os
import random
import subprocess
import sys
import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import yaml

from tests.support.broker import Broker
from tests.support.collector import NOT_BUILT, Collector, collector_path, doc_config, free_port
from tests.support.operations import collect, invariants
from tests.support.operations.daemon import Daemon
from tests.support.operations.disk import Disk, DiskUnavailable
from tests.support.operations.judge import Judge
from tests.support.operations.people import Gate, ReadLoop, Reviewers
from tests.support.operations.records import Fault, Run, Stored
from tests.support.operations.traffic import NativeTraffic, OtlpApp, otlp_plan
from tests.support.producers import realistic_trace

ROOT = Path(__file__).resolve().parents[3]
TOPIC, DLQ = "ops.traces", "ops.traces.dlq"
OUTCOMES, OUTCOMES_DLQ = "ops.outcomes", "ops.outcomes.dlq"
INGEST_GROUP, SCORE_GROUP, OUTCOMES_GROUP = "ops-ingest", "ops-score", "ops-outcomes"
SALT = "ops-salt"
PASSWORDS = {"alice": "alice-ops-password-1", "bob": "bob-ops-password-2"}
TOKENS = {"alice": "alice-ops-api-token-0123456789", "bob": "bob-ops-api-token-0123456789"}
FAULTS = ("judge_429", "judge_500", "sigterm", "kill_9", "broker", "disk")


class Unavailable(Exception):
    """A part the scenario needs is missing on this machine (the message says which and how to get it)."""


@dataclass(frozen=True)
class FaultStep:
    at: float               # seconds after the traffic started
    kind: str               # one of FAULTS
    seconds: float = 0.0    # how long it lasts (judge, disk); restarts take what they take

    def __post_init__(self) -> None:
        if self.kind not in FAULTS:
            raise ValueError(f"fault {self.kind!r}: expected one of {', '.join(FAULTS)}")


@dataclass(frozen=True)
class Plan:
    seconds: float                                   # traffic runs this long; the faults happen inside it
    faults: tuple[FaultStep, ...]
    slow: tuple[tuple[float, float], ...] = ()       # (at, LLM seconds) of the slow queries, on each OTLP path
    native_per_second: float = 8.0
    otlp_per_minute: float = 20.0                    # per OTLP path
    sampling_rate: float = 0.2
    read_pause_seconds: float = 4.0
    people_pause_seconds: float = 1.0
    recovery_bound_seconds: float = 90.0             # /readyz must answer 200 within this after each fault
    disk_mb: int = 1024
    drain_seconds: float = 120.0
    seed_traces: int = 200
    seed: int = 30

    def describe(self) -> str:
        kinds = ", ".join(f"{f.kind}@{f.at:.0f}s" + (f"/{f.seconds:.0f}s" if f.seconds else "") for f in self.faults)
        return (f"{self.seconds / 60:.1f} min of traffic: {self.native_per_second:g} native traces/s, "
                f"{self.otlp_per_minute:g} OTLP queries/min on each of 2 paths ({len(self.slow)} slow per path: "
                f"{', '.join(f'{s:.0f}s' for _, s in self.slow)}), sampling {self.sampling_rate:g}; faults: {kinds}")


def ci_plan() -> Plan:
    """A few minutes: every fault once, two queries per OTLP path whose LLM call lasts over two minutes (one spans
    the SIGTERM, both the broker restart and the full disk, one the kill -9)."""
    return Plan(seconds=215, faults=(
        FaultStep(20, "judge_429", 20), FaultStep(50, "sigterm"), FaultStep(80, "broker"),
        FaultStep(110, "disk", 20), FaultStep(150, "kill_9"), FaultStep(180, "judge_500", 20)),
        slow=((5, 125), (60, 121)))


CYCLE_SECONDS = 360.0


def long_plan(minutes: float) -> Plan:
    """``minutes`` of traffic in cycles of about 6 minutes (one, shortened, under 6 minutes; at least 4), each with
    every fault once and three queries per OTLP path whose LLM call lasts about two minutes (the other queries:
    0.1–3 s, one in ten 5–30 s)."""
    seconds = max(240.0, minutes * 60)
    cycles = max(1, int(seconds // CYCLE_SECONDS))
    length = seconds / cycles
    k = length / CYCLE_SECONDS  # every offset of the cycle scaled to its length
    faults, slow = [], []
    for c in range(cycles):
        o = c * length
        faults += [FaultStep(o + 20 * k, "judge_429", 30 * k), FaultStep(o + 70 * k, "sigterm"),
                   FaultStep(o + 120 * k, "broker"), FaultStep(o + 170 * k, "disk", 30 * k),
                   FaultStep(o + 240 * k, "kill_9"), FaultStep(o + 290 * k, "judge_500", 30 * k)]
        slow += [(o + 10 * k, 120.0), (o + 100 * k, 118.0), (o + length - 125, 120.0)]
    return Plan(seconds=seconds, faults=tuple(faults), slow=tuple(slow), drain_seconds=600)


@dataclass
class Outcome:
    run: Run
    checks: list[invariants.Check]
    report: str
    workdir: Path
    summary: dict[str, Any] = field(default_factory=dict)
    negative: dict[str, Any] = field(default_factory=dict)  # the real negative control (``Harness(damage=True)``)

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)


def _ragmon(config: Path, *args: str, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    out = subprocess.run([sys.executable, "-m", "ragmon", "--config", str(config), *args], capture_output=True,
                         text=True, timeout=timeout, cwd=cwd, env={**_env(), "COLUMNS": "200"})
    if out.returncode != 0:
        raise RuntimeError(f"ragmon {' '.join(args)} failed (exit {out.returncode}):\n{out.stdout}{out.stderr}")
    return out


def _env() -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=str(ROOT))


class Harness:
    """One run of a plan in ``workdir``; ``run()`` returns the ``Outcome``. See the module docstring."""

    def __init__(self, plan: Plan, workdir: Path, *, say: Callable[[str], None] = print, damage: bool = False):
        self.plan, self.workdir, self.say, self.damage = plan, workdir, say, damage
        self.negative: dict[str, Any] = {}
        self.record = Run()
        self.gate = Gate()
        self.ports = {"kafka": free_port(), "controller": free_port(), "server": free_port(), "otlp": free_port()}
        self.base = f"http://127.0.0.1:{self.ports['server']}"
        self.origin = 0.0

    def log(self, message: str) -> None:
        t = f"+{time.time() - self.origin:6.1f}s" if self.origin else "  setup"
        self.say(f"[operations {t}] {message}")

    # -- set-up -----------------------------------------------------------------------------------------------------

    def _topics(self, broker: Broker) -> None:
        from kafka import KafkaAdminClient

        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=30_000)
        try:
            admin.create_topics({TOPIC: {"num_partitions": 3, "replication_factor": 1},
                                 DLQ: {"num_partitions": 1, "replication_factor": 1},
                                 OUTCOMES: {"num_partitions": 2, "replication_factor": 1},
                                 OUTCOMES_DLQ: {"num_partitions": 1, "replication_factor": 1}},
                                timeout_ms=30_000, wait_for_metadata=True)
        finally:
            admin.close()

    def _config(self, broker: Broker, judge: Judge, disk: Disk) -> Path:
        from ragmon.review.auth import hash_password, token_digest

        users = [{"username": u, "password_hash": hash_password(pw), "token_sha256": token_digest(TOKENS[u])}
                 for u, pw in PASSWORDS.items()]
        config = {
            "store": {"dsn": f"chdb://{disk.path / 'chdb'}"},
            "kafka": {"bootstrap_servers": broker.bootstrap, "topic": TOPIC, "dead_letter_topic": DLQ,
                      "group_id": INGEST_GROUP, "session_timeout_ms": 6000},
            "ingest": {"flush_interval_seconds": 0.5},
            "otlp": {"port": self.ports["otlp"], "dead_letters": str(self.workdir / "otlp-dead-letters.jsonl")},
            "ab": {"outcomes_topic": OUTCOMES, "outcomes_dead_letter_topic": OUTCOMES_DLQ,
                   "outcomes_group_id": OUTCOMES_GROUP},
            "score": {"group_id": SCORE_GROUP},
            "sampling": {"rate": self.plan.sampling_rate, "salt": SALT},
            "judge": {"kind": "openai", "base_url": judge.base_url, "model": "judge-model", "api_key": "ops-key",
                      "timeout_seconds": 15, "max_in_flight": 8},
            "drift": {"interval_seconds": 60},
            "shadow": {"interval_seconds": 60, "comparisons": [{"baseline": "hybrid@v1", "candidate": "hybrid@v2"}]},
            "review": {"users": users, "session_secret": "ops-session-secret-" + "x" * 24, "sample_size": 30},
            "server": {"port": self.ports["server"]},
            "roles": {"ingest": True, "otlp": True, "outcomes": True, "score": True, "drift": True, "review": True,
                      "shadow": True},
        }
        path = self.workdir / "ragmon.yaml"
        path.write_text(yaml.safe_dump(config), encoding="utf-8")
        return path

    def _seed(self, config: Path) -> str:
        """Last week's traffic in the store, its review sample and its triage queue; returns the week."""
        from ragmon.review.records import parse_week, previous_week

        week = previous_week(datetime.now(UTC))
        start, end = parse_week(week)
        rng = random.Random(self.plan.seed)
        lines = []
        for i in range(self.plan.seed_traces):
            ts = start + timedelta(seconds=rng.uniform(0, (end - start).total_seconds() - 1))
            extra = {"feedback": {"rating": -1, "comment": "that is not what the policy says"}} if i % 8 == 0 else {}
            trace = realistic_trace(i, rng, trace_id=f"ops-seed-{i:04d}", query_id=f"ops-seed-q-{i:04d}",
                                    timestamp=ts.isoformat(timespec="milliseconds"), **extra)
            lines.append(json.dumps(trace))
            self.record.sent.seed.add(trace["trace_id"])
        seed = self.workdir / "seed.jsonl"
        seed.write_text("\n".join(lines) + "\n", encoding="utf-8")
        _ragmon(config, "ingest", "--file", str(seed), "--dead-letter-file", str(self.workdir / "seed-dead.jsonl"),
                cwd=self.workdir)
        _ragmon(config, "review", "select", "--week", week, "--size", "30", "--seed", "ops", cwd=self.workdir)
        _ragmon(config, "review", "triage", "--week", week, "--seed", "ops", cwd=self.workdir)
        return week

    def _queues(self, week: str) -> tuple[list[str], list[str]]:
        auth = {"Authorization": f"Bearer {TOKENS['alice']}"}
        queue = httpx.get(f"{self.base}/review/api/v1/weeks/{week}/queue", headers=auth, timeout=60).json()
        triage = httpx.get(f"{self.base}/review/api/v1/triage/weeks/{week}/queue", headers=auth, timeout=60).json()
        return [i["trace_id"] for i in queue["items"]], [i["trace_id"] for i in triage["items"]]

    # -- faults -----------------------------------------------------------------------------------------------------

    def _inject(self, step: FaultStep, daemon: Daemon, broker: Broker, judge: Judge, disk: Disk) -> Fault:
        bound = self.plan.recovery_bound_seconds + 5  # not recovered by then: the check fails anyway; go on
        started = time.time()
        if step.kind in ("judge_429", "judge_500"):
            judge.mode = step.kind[-3:]
            time.sleep(step.seconds)
            judge.mode = "ok"
            ended = time.time()
            deadline = time.monotonic() + bound
            while (recovered := judge.first_ok_after(ended)) is None and time.monotonic() < deadline:
                time.sleep(0.5)
            return Fault(step.kind, started, ended, recovered, f"judge answered {judge.counts()} so far")
        if step.kind in ("sigterm", "kill_9"):
            self.gate.close()
            started = time.time()
            life = daemon.sigterm() if step.kind == "sigterm" else daemon.kill_9()
            ended = time.time()
            new = daemon.start()
            self.gate.open()
            return Fault(step.kind, started, ended, new.ready,
                         f"lifetime {life.index} exited {life.exit_code} after {ended - started:.1f}s")
        if step.kind == "broker":
            before = broker.pid()
            broker.script("restart")
            ended = time.time()
            committed = sum(daemon.committed().values())
            deadline = time.monotonic() + bound
            while sum(daemon.committed().values()) <= committed and time.monotonic() < deadline:
                time.sleep(1)
            moving = time.time() if time.monotonic() < deadline else None
            ready = daemon.wait_ready(ended, max(1.0, deadline - time.monotonic()))
            recovered = None if moving is None or ready is None else max(moving, ready)
            return Fault("broker", started, ended, recovered, f"broker pid {before} → {broker.pid()}; ingest "
                         f"committing again {'never' if moving is None else f'{moving - ended:.1f}s'} after")
        # disk
        filled = disk.fill()
        time.sleep(step.seconds)
        disk.free()
        ended = time.time()
        recovered = daemon.wait_ready(ended, bound)
        unready = [t for t, ok in daemon.ready_log if not ok and started <= t <= ended]
        return Fault("disk", started, ended, recovered,
                     f"{filled}; /readyz failing {len(unready) / 2:.0f}s of the {ended - started:.0f}s")

    # -- the end ---------------------------------------------------------------------------------------------------

    def _drain(self, daemon: Daemon, bootstrap: str) -> bool:
        """Wait until every consumer group of the daemon committed up to its topic's end."""
        from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition

        deadline = time.monotonic() + self.plan.drain_seconds
        pending: list[str] = []
        while time.monotonic() < deadline:
            consumer = KafkaConsumer(bootstrap_servers=bootstrap)
            admin = KafkaAdminClient(bootstrap_servers=bootstrap)
            try:
                pending = []
                for topic, groups in ((TOPIC, (INGEST_GROUP, SCORE_GROUP)), (OUTCOMES, (OUTCOMES_GROUP,))):
                    parts = [TopicPartition(topic, p) for p in consumer.partitions_for_topic(topic) or ()]
                    ends = {tp.partition: o for tp, o in consumer.end_offsets(parts).items()}
                    for group in groups:
                        got = {tp.partition: om.offset for tp, om in
                               admin.list_group_offsets({group: None}).get(group, {}).items() if tp.topic == topic}
                        behind = sum(max(0, e - got.get(p, 0)) for p, e in ends.items())
                        if behind:
                            pending.append(f"{group} {behind} behind")
            finally:
                consumer.close()
                admin.close()
            if not pending:
                return True
            time.sleep(2)
        self.record.notes.append(f"drain: not caught up after {self.plan.drain_seconds:.0f}s: {', '.join(pending)}")
        return False

    def _sampled(self) -> set[str]:
        from ragmon.sampling.sampler import hash_position

        return {t for t, q in self.record.sent.native.items() if hash_position(SALT, q) < self.plan.sampling_rate}

    # -- the whole run -----------------------------------------------------------------------------------------------

    def run(self) -> Outcome:
        import logging

        # the harness's own Kafka clients complain through every broker restart; what matters is in the report
        quiet = logging.getLogger("kafka")
        level = quiet.level
        quiet.setLevel(logging.CRITICAL)
        try:
            return self._run()
        finally:
            quiet.setLevel(level)

    def _run(self) -> Outcome:
        self.workdir.mkdir(parents=True, exist_ok=True)
        rec, plan = self.record, self.plan
        with ExitStack() as stack:
            broker = Broker(self.workdir / "kafka", self.ports["kafka"], self.ports["controller"])
            stack.callback(broker.script, "stop", False)
            broker.script("start")
            self._topics(broker)
            judge = stack.enter_context(Judge(seed=plan.seed))
            try:
                disk = Disk(self.workdir / "disk", plan.disk_mb).open()
            except DiskUnavailable as exc:
                raise Unavailable(str(exc)) from None
            stack.callback(disk.close)
            rec.notes.append(f"store disk: {disk.how}")
            config = self._config(broker, judge, disk)
            self.log(f"broker {broker.bootstrap}, judge {judge.base_url}, store {disk.how}; loading last week")
            week = self._seed(config)
            daemon = Daemon(config, self.workdir, self.base, bootstrap=broker.bootstrap, group=INGEST_GROUP,
                            topic=TOPIC, failures=rec.failures)
            stack.callback(daemon.close)
            collector_config = copy.deepcopy(doc_config())
            kafka = collector_config["exporters"]["kafka"]
            kafka["brokers"] = [broker.bootstrap]
            kafka["traces"].update(topic=TOPIC, encoding="otlp_proto")
            kafka["partition_traces_by_id"] = True
            binary = collector_path()
            if binary is None:
                raise Unavailable(NOT_BUILT)
            collector = stack.enter_context(Collector(binary, collector_config, self.workdir))
            daemon.start()
            self.gate.open()
            queue, triage = self._queues(week)
            self.log(f"ragmon run ready at {self.base}; review week {week}: {len(queue)} queued, {len(triage)} in "
                     "triage")
            apps = [OtlpApp("collector", collector.otlp_http,
                            otlp_plan(plan.seconds, per_minute=plan.otlp_per_minute, slow=list(plan.slow),
                                      seed=plan.seed),
                            self.workdir),
                    OtlpApp("direct", f"http://127.0.0.1:{self.ports['otlp']}/v1/traces",
                            otlp_plan(plan.seconds, per_minute=plan.otlp_per_minute, slow=list(plan.slow),
                                      seed=plan.seed + 1), self.workdir)]
            for app in apps:
                stack.callback(app.kill)
                app.start()
            traffic = NativeTraffic(broker.bootstrap, TOPIC, OUTCOMES, per_second=plan.native_per_second,
                                    seconds=plan.seconds, seed=plan.seed)
            reads = ReadLoop(config, self.workdir / "reads", self.gate, pause_seconds=plan.read_pause_seconds)
            reviewers = Reviewers(self.base, self.gate, week=week, passwords=PASSWORDS, tokens=TOKENS, queue=queue,
                                  triage=triage, stored_trace=sorted(rec.sent.seed)[0],
                                  pause_seconds=plan.people_pause_seconds, failures=rec.failures)
            for worker in (traffic, reads, reviewers):
                stack.callback(worker.stop.set)
                worker.start()
            self.origin = rec.started = time.time()
            self.log(f"traffic, people and faults: {plan.describe()}")
            for step in plan.faults:
                time.sleep(max(0.0, self.origin + step.at - time.time()))
                self.log(f"fault: {step.kind}" + (f" for {step.seconds:g}s" if step.seconds else ""))
                fault = self._inject(step, daemon, broker, judge, disk)
                rec.faults.append(fault)
                self.log(f"  {fault.kind}: recovered "
                         f"{'never' if fault.recovery_seconds is None else f'{fault.recovery_seconds:.1f}s'} after; "
                         f"{fault.note}")
            time.sleep(max(0.0, self.origin + plan.seconds - time.time()))
            self.log("traffic ends; waiting for acknowledgements, the applications' last queries, the people")
            native = traffic.finish()
            if traffic.error is not None:
                rec.notes.append(f"native traffic stopped early: {traffic.error!r}")
            longest = max([s for _, s in plan.slow] + [30.0])
            for app in apps:
                code = app.wait(longest + 300)
                if code != 0:
                    rec.notes.append(f"the {app.path} application exited {code} (see {app.log})")
                    app.kill()
            reads.stop.set()
            reviewers.stop.set()
            reads.join(330)
            reviewers.join(120)
            collector.__exit__(None, None, None)  # it flushes what it holds into Kafka
            self.log("draining")
            self._drain(daemon, broker.bootstrap)
            time.sleep(5)  # OTLP/HTTP traces settle (a clean stop stores whatever still assembles anyway)
            daemon.sigterm("final")
            rec.ended = time.time()
            self.log("reading back: the store with FINAL, the dead letters, the topic")
            rec.sent.native, rec.sent.invalid = native.native, native.invalid
            rec.sent.outcomes, rec.sent.invalid_outcomes = native.outcomes, native.invalid_outcomes
            rec.sent.not_acked = native.not_acked
            for app in apps:
                queries, others = app.sent()
                rec.sent.otlp.update(queries)
                rec.sent.non_queries.update(others)
            rec.sent.sampled = self._sampled()
            rec.stored = collect.read_store(f"chdb://{disk.path / 'chdb'}", "ragmon")
            if rec.stored.detached:
                rec.notes.append("parts the engine detached (their rows are not read): "
                                 f"{', '.join(rec.stored.detached)}")
            rec.letters = (collect.read_letters(broker.bootstrap, DLQ)
                           + collect.read_letter_file(self.workdir / "otlp-dead-letters.jsonl"))
            rec.outcome_letters = collect.read_letters(broker.bootstrap, OUTCOMES_DLQ)
            rec.topic = collect.scan_topic(broker.bootstrap, TOPIC)
            rec.labels = reviewers.labels
            rec.attempts = reads.attempts + reviewers.attempts
            rec.lifetimes = daemon.lifetimes
            rec.notes += daemon.notes
            logged, others = daemon.log_failures()
            rec.failures += logged
            rec.fingerprint = _fingerprint(daemon)
            rec.extra["warnings_outside_faults"] = [
                text for at, text in others if not invariants.in_window(at, invariants.fault_windows(rec))
                and not _noise(text)]
            rec.extra["judge"] = judge.counts()
            if self.damage:
                self._damage(f"chdb://{disk.path / 'chdb'}")
            size = sum(f.stat().st_size for f in (disk.path / "chdb").rglob("*") if f.is_file())
            rec.notes.append(f"the store's directory at the end: {size / 2**20:.0f} MiB")
        checks = invariants.check_all(rec, traces_topic=TOPIC, recovery_bound_seconds=plan.recovery_bound_seconds)
        return Outcome(rec, checks, self._report(checks), self.workdir, _summary(rec, checks, plan), self.negative)

    def _damage(self, dsn: str) -> None:
        """The real negative control: damage the stopped store (a trace deleted, one doubled, a label deleted), read
        it again and check it with the same checkers; they must name exactly the damage."""
        rec = self.record
        # the checks over what the run got right, so that whatever else failed does not blur the damage
        right = {t for t, s in rec.stored.traces.items() if s.rows == 1 and not s.incomplete}
        sent = replace(rec.sent, native={t: q for t, q in rec.sent.native.items() if t in right},
                       seed=rec.sent.seed & right, invalid={},
                       otlp={t: o for t, o in rec.sent.otlp.items()
                             if t in right and o.whole and rec.stored.traces[t].answer == o.answer})
        kept = set(sent.native) | sent.seed | set(sent.otlp)
        good_labels = [lb for lb in rec.labels if invariants.labels(replace(rec, labels=[lb])).ok]
        stored = sorted(sent.native)
        labelled = sorted({(lb.trace_id, lb.reviewer) for lb in good_labels if lb.kind == "review"})
        if len(stored) < 2 or not labelled:
            self.negative = {"skipped": "not enough stored traces and labels to damage"}
            return
        damage = {"delete": stored[0], "double": stored[1], "unlabel": labelled[0]}

        def scoped(stored: Stored) -> Run:
            return replace(rec, sent=sent, letters=[], labels=good_labels,
                           stored=replace(stored, traces={t: v for t, v in stored.traces.items() if t in kept}))

        before = scoped(rec.stored)
        collect.doctor_store(dsn, "ragmon", **damage)
        after = scoped(collect.read_store(dsn, "ragmon"))
        self.negative = {**damage, "before": [invariants.traces_once(before), invariants.labels(before)],
                         "checks": [invariants.traces_once(after), invariants.labels(after)]}

    def _report(self, checks: list[invariants.Check]) -> str:
        rec = self.record
        lines = [f"operations scenario in {self.workdir}", f"plan: {self.plan.describe()}", "", "faults:"]
        lines += ["  " + r for r in invariants.fault_rows(rec.faults, rec.started)]
        lines += ["", "process lifetimes:"] + ["  " + r for r in invariants.lifetime_rows(rec, TOPIC)]
        lines += ["", "invariants:", invariants.table(checks), ""]
        if rec.notes:
            lines += ["notes:"] + [f"  {n}" for n in rec.notes]
        outside = rec.extra.get("warnings_outside_faults", [])
        if outside:
            lines.append(f"other warnings of the daemon outside fault windows ({len(outside)}; not failures, for "
                         "reading):")
            lines += [f"  {w[:300]}" for w in outside[:15]]
        lines.append(f"judge answers by status: {rec.extra.get('judge')}; daemon logs: {self.workdir}/daemon-*.log")
        return "\n".join(lines)


def _fingerprint(daemon: Daemon) -> str:
    import re

    for life in reversed(daemon.lifetimes):
        text = Path(life.log).read_text(encoding="utf-8", errors="replace")
        found = re.findall(r"judge openai \(model '[^']*'\) fingerprint ([0-9a-f]+)", text)
        if found:
            return found[-1]
    return ""


_NOISE = ("heartbeat_interval_ms is high", "kafka.coordinator", "kafka.cluster", "kafka.conn", "kafka.client",
          "kafka.net", "does not exist on", "over plain HTTP", "No partition metadata")


def _noise(text: str) -> bool:
    return any(n in text for n in _NOISE)


def _summary(rec: Run, checks: list[invariants.Check], plan: Plan) -> dict[str, Any]:
    stored = rec.stored.traces
    expected = set(rec.sent.native) | rec.sent.seed | {t for t, o in rec.sent.otlp.items() if o.whole}
    kinds: dict[str, int] = {}
    for f in rec.faults:
        kinds[f.kind] = kinds.get(f.kind, 0) + 1
    reads = [a for a in rec.attempts if a.kind == "read"]
    recoveries = [f.recovery_seconds for f in rec.faults if f.recovery_seconds is not None]
    return {
        "minutes": round((rec.ended - rec.started) / 60, 1),
        "traces_sent": len(expected),
        "otlp": sum(1 for o in rec.sent.otlp.values() if o.whole),
        "otlp_slow": sum(1 for o in rec.sent.otlp.values() if o.whole and o.llm_seconds >= 100),
        "lost": sum(1 for t in expected if t not in stored),
        "doubled": sum(1 for s in stored.values() if s.rows > 1),
        "dead_letters":
            f"{sum(1 for po in rec.sent.invalid if any((d.partition, d.offset) == po for d in rec.letters))}"
            f"/{len(rec.sent.invalid)}",
        "labels": len(rec.labels),
        "labels_lost": next(len(c.details) for c in checks if c.name.startswith("every label")),
        "sampled": len(rec.sent.sampled),
        "reads": f"{sum(1 for a in reads if a.ok)}/{len(reads)}"
                 + (f" ({n} interrupted by a restart)" if (n := len(invariants.interrupted_reads(rec))) else "")
                 + (f" ({n} failed while the store's disk was full)"
                    if (n := sum(1 for a in reads if a not in invariants.interrupted_reads(rec)
                                 and invariants.refused_while_disk_full(rec, a))) else ""),
        "faults": kinds,
        "slowest_recovery_seconds": ("never" if any(f.recovery_seconds is None for f in rec.faults) or not recoveries
                                     else round(max(recoveries), 1)),
        "held": f"{sum(c.ok for c in checks)}/{len(checks)}",
        "failed": [c.name for c in checks if not c.ok],
        "plan_seconds": plan.seconds,
    }


def summary_line(outcome: Outcome) -> str:
    s = outcome.summary
    faults = ", ".join(f"{k} {n}" for k, n in sorted(s["faults"].items()))
    return (f"operations: {s['minutes']} min; {s['traces_sent']:,} traces sent ({s['otlp']:,} OTLP, {s['otlp_slow']} "
            f"with LLM calls ≥ 100 s), {s['lost']} lost, {s['doubled']} doubled; dead letters {s['dead_letters']}; "
            f"{s['labels']} labels saved, {s['labels_lost']} lost; {s['sampled']:,} sampled traces; reads ok "
            f"{s['reads']}; faults: {faults}; slowest recovery {s['slowest_recovery_seconds']}"
            f"{'' if s['slowest_recovery_seconds'] == 'never' else ' s'}; invariants "
            f"{s['held']} held" + (f" (failed: {'; '.join(s['failed'])})" if s["failed"] else ""))


def run_scenario(plan: Plan, workdir: Path, *, say: Callable[[str], None] = print, damage: bool = False) -> Outcome:
    """Run ``plan`` in ``workdir`` (see ``Harness``); ``damage``: also the real negative control on the store."""
    return Harness(plan, workdir, say=say, damage=damage).run()

