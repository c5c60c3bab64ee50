"""Many judge calls in flight against the real Kafka broker and chDB, a slow and flaky judge, and a kill -9.

``ragmon score`` runs as a subprocess with its own chDB directory, judging with ``judge.max_in_flight`` 16 against
a local provider that takes 0.2–0.6 s an answer, refuses past 1,200 requests a minute (429) and fails one
request in ten (500). It is killed with SIGKILL while calls are in flight and after some batches were committed;
a second run of the same consumer group finishes the topic. Then, read with FINAL from a fresh process: every
trace has one sampling decision, and every sampled trace exactly one row per metric, none of them failed.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ragmon.judge.scoring import METRICS
from ragmon.sampling.sampler import ScoreSampler
from tests.conftest import make_trace
from tests.integration.ingest_support import ROOT, committed, produce
from tests.support.openai_server import FakeOpenAI, Provider

pytestmark = pytest.mark.kafka

COUNT = """
import json, sys
from pydantic import SecretStr
from ragmon.config import StoreSettings
from ragmon.store import ClickHouseStore
store = ClickHouseStore.open(StoreSettings(dsn=SecretStr(sys.argv[1])))
q = lambda sql: store.query_rows(sql)
print(json.dumps({
  "decisions": q("SELECT trace_id, decision FROM ragmon.sampling_decisions FINAL"),
  "scores": q("SELECT trace_id, metric, status FROM ragmon.scores FINAL"),
  "raw_scores": int(store.command("SELECT count() FROM ragmon.scores")),
}, default=str))
"""


def score_cmd(bootstrap: str, topic: str, group: str, *extra: str) -> list[str]:
    return [sys.executable, "-m", "ragmon", "score", "--bootstrap-servers", bootstrap, "--topic", topic,
            "--group-id", group, "--rate", "0.5", "--judge", "openai", "--port", "0", *extra]


def score_env(chdb: Path, base_url: str) -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=str(ROOT), RAGMON_STORE__DSN=f"chdb://{chdb}",
                RAGMON_KAFKA__SESSION_TIMEOUT_MS="6000", RAGMON_JUDGE__BASE_URL=base_url,
                RAGMON_JUDGE__MAX_IN_FLIGHT="16", RAGMON_JUDGE__CACHE_MAX_ENTRIES="0",
                RAGMON_JUDGE__BACKOFF_INITIAL_SECONDS="0.05", RAGMON_JUDGE__BACKOFF_MAX_SECONDS="1",
                RAGMON_SCORE__FLUSH_INTERVAL_SECONDS="0.3", RAGMON_SCORE__MAX_BATCH_TRACES="50")


def test_kill_9_with_judge_calls_in_flight_then_every_sampled_trace_is_scored_exactly_once(
        kafka_bootstrap, new_topic, tmp_path):
    topic = new_topic(partitions=3)
    group = f"g-{topic}"
    docs = [make_trace(trace_id=f"k-{i}", query_id=f"kq-{i}") for i in range(300)]
    produce(kafka_bootstrap, topic, [json.dumps(d).encode() for d in docs])
    sampler = ScoreSampler(salt="ragmon-score-v1", rate=0.5)
    sampled = {d["trace_id"] for d in docs if sampler.decide(d["query_id"]).sampled}
    chdb = tmp_path / "chdb"
    provider = Provider(latency_seconds=0.4, jitter_seconds=0.2, requests_per_minute=1200, error_rate=0.1, seed=3)

    with FakeOpenAI(responder=provider) as server:
        env = score_env(chdb, server.base_url)
        first = subprocess.Popen(score_cmd(kafka_bootstrap, topic, group), env=env, cwd=ROOT,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            deadline = time.monotonic() + 120
            # kill once some batches are committed and while many calls are on the wire
            while not (sum(committed(kafka_bootstrap, group).values()) >= 50 and provider.in_flight >= 8):
                assert first.poll() is None, first.stderr.read() if first.stderr else ""
                assert time.monotonic() < deadline, f"no commit with calls in flight: {provider.counts}"
                time.sleep(0.02)
            in_flight_at_kill = provider.in_flight
            first.send_signal(signal.SIGKILL)
            first.wait(30)
        finally:
            if first.poll() is None:
                first.kill()
        assert first.returncode == -signal.SIGKILL
        offsets_at_kill = sum(committed(kafka_bootstrap, group).values())
        answered_before = sum(provider.counts.values())

        # the killed member holds its partitions until its session times out; the restart waits for that
        second = subprocess.run(score_cmd(kafka_bootstrap, topic, group, "--exit-when-idle", "12"), env=env,
                                cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert second.returncode == 0, second.stderr[-3000:]
    assert in_flight_at_kill >= 8 and 50 <= offsets_at_kill < len(docs)  # the fault really happened mid-stream
    assert provider.counts["429"] > 0 and provider.counts["500"] > 0  # and the judge really was slow and flaky

    out = subprocess.run([sys.executable, "-c", COUNT, f"chdb://{chdb}"], capture_output=True, text=True,
                         timeout=120, cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert out.returncode == 0, out.stderr
    found = json.loads(out.stdout.strip().splitlines()[-1])
    decided = [r["trace_id"] for r in found["decisions"]]
    assert sorted(decided) == sorted(d["trace_id"] for d in docs)  # one decision per trace
    per_trace: dict[str, list[str]] = {}
    for row in found["scores"]:
        per_trace.setdefault(row["trace_id"], []).append(row["metric"])
    assert set(per_trace) == sampled
    assert all(sorted(m) == sorted(METRICS) for m in per_trace.values())  # each metric once per trace
    assert not [r for r in found["scores"] if r["status"] == "failed"]
    print(f"kill -9 with {in_flight_at_kill} calls in flight after {offsets_at_kill} committed offsets; "
          f"{answered_before} answers before, {sum(provider.counts.values())} in all ({provider.counts}); "
          f"{found['raw_scores']} score rows on disk, {len(found['scores'])} under FINAL")


def test_sigterm_abandons_calls_still_running_within_the_grace_period_and_commits_none_of_them(
        kafka_bootstrap, new_topic, tmp_path):
    topic = new_topic(partitions=2)
    group = f"g-{topic}"
    produce(kafka_bootstrap, topic, [json.dumps(make_trace(query_id=f"tq-{i}")).encode() for i in range(40)],
            partitions=2)
    provider = Provider(latency_seconds=120)  # no call answers before the grace period ends
    with FakeOpenAI(responder=provider) as server:
        env = dict(score_env(tmp_path / "chdb", server.base_url), RAGMON_PROCESS__SHUTDOWN_GRACE_SECONDS="6")
        proc = subprocess.Popen(score_cmd(kafka_bootstrap, topic, group, "--rate", "1"), env=env, cwd=ROOT,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 120
        while provider.in_flight < 16:
            assert proc.poll() is None and time.monotonic() < deadline, f"calls never in flight: {provider.counts}"
            time.sleep(0.02)
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=120)
    # exit 0: the loop returned within the grace period (``ragmon score`` exits 1 when it does not)
    assert proc.returncode == 0, stderr[-3000:]
    assert "abandoned, not committed" in stderr
    assert sum(committed(kafka_bootstrap, group).values()) == 0  # every trace was sampled, none judged


def heuristic_env(chdb: Path, session_timeout_ms: int) -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=str(ROOT), RAGMON_STORE__DSN=f"chdb://{chdb}",
                RAGMON_KAFKA__SESSION_TIMEOUT_MS=str(session_timeout_ms), RAGMON_SCORE__FLUSH_INTERVAL_SECONDS="0.3",
                RAGMON_SCORE__MAX_BATCH_TRACES="50")


def heuristic_score(bootstrap: str, topic: str, group: str, *extra: str) -> list[str]:
    return [sys.executable, "-m", "ragmon", "score", "--bootstrap-servers", bootstrap, "--topic", topic,
            "--group-id", group, "--rate", "0.5", "--judge", "heuristic", "--port", "0", *extra]


def test_exit_when_idle_started_at_once_after_a_kill_9_waits_for_the_partitions_and_scores_everything(
        kafka_bootstrap, new_topic, tmp_path):
    # the killed member keeps the group's partitions until its session times out (10 s here): a scorer started
    # at once is assigned nothing until then, and must not take those seconds without a message for idleness
    topic = new_topic(partitions=3)
    group = f"g-{topic}"
    before = [make_trace(trace_id=f"b-{i}", query_id=f"bq-{i}") for i in range(60)]
    after = [make_trace(trace_id=f"a-{i}", query_id=f"aq-{i}") for i in range(60)]
    produce(kafka_bootstrap, topic, [json.dumps(d).encode() for d in before])
    chdb = tmp_path / "chdb"
    env = heuristic_env(chdb, 10_000)
    first = subprocess.Popen(heuristic_score(kafka_bootstrap, topic, group), env=env, cwd=ROOT,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while sum(committed(kafka_bootstrap, group).values()) < len(before):  # it holds the partitions
            assert first.poll() is None, first.stderr.read() if first.stderr else ""
            assert time.monotonic() < deadline, "the first scorer never committed the first traces"
            time.sleep(0.05)
        first.send_signal(signal.SIGKILL)
        first.wait(30)
    finally:
        if first.poll() is None:
            first.kill()
    produce(kafka_bootstrap, topic, [json.dumps(d).encode() for d in after])  # only the next scorer can score these

    second = subprocess.run(heuristic_score(kafka_bootstrap, topic, group, "--exit-when-idle", "2"), env=env,
                            cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert second.returncode == 0, second.stderr[-3000:]
    assert sum(committed(kafka_bootstrap, group).values()) == len(before) + len(after)

    out = subprocess.run([sys.executable, "-c", COUNT, f"chdb://{chdb}"], capture_output=True, text=True,
                         timeout=120, cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert out.returncode == 0, out.stderr
    found = json.loads(out.stdout.strip().splitlines()[-1])
    docs = before + after
    sampler = ScoreSampler(salt="ragmon-score-v1", rate=0.5)
    sampled = {d["trace_id"] for d in docs if sampler.decide(d["query_id"]).sampled}
    assert sorted(r["trace_id"] for r in found["decisions"]) == sorted(d["trace_id"] for d in docs)
    per_trace: dict[str, list[str]] = {}
    for row in found["scores"]:
        per_trace.setdefault(row["trace_id"], []).append(row["metric"])
    assert set(per_trace) == sampled and sampled & {d["trace_id"] for d in after}
    assert all(sorted(m) == sorted(METRICS) for m in per_trace.values())  # each metric once per sampled trace


@pytest.mark.parametrize("command", ["score", "ingest"])
def test_exit_when_idle_never_assigned_a_partition_says_so_and_exits_3(kafka_bootstrap, new_topic, tmp_path,
                                                                       command):
    # a member that stopped polling holds the only partition; the group waits for it to rejoin (up to its
    # max.poll.interval.ms, five minutes), so the command is assigned nothing: it must not call that idle
    from kafka import KafkaConsumer

    topic = new_topic(partitions=1)
    group = f"g-{topic}"
    produce(kafka_bootstrap, topic, [json.dumps(make_trace()).encode() for _ in range(5)], partitions=1)
    holder = KafkaConsumer(topic, bootstrap_servers=kafka_bootstrap, group_id=group, enable_auto_commit=False,
                           session_timeout_ms=6000, auto_offset_reset="earliest")
    try:
        deadline = time.monotonic() + 60
        while not holder.assignment():
            holder.poll(timeout_ms=200)
            assert time.monotonic() < deadline, "the holder was never assigned the partition"
        args = (heuristic_score(kafka_bootstrap, topic, group) if command == "score" else
                [sys.executable, "-m", "ragmon", "ingest", "--bootstrap-servers", kafka_bootstrap, "--topic", topic,
                 "--group-id", group, "--port", "0"])
        run = subprocess.run([*args, "--exit-when-idle", "1"], env=heuristic_env(tmp_path / "chdb", 6000), cwd=ROOT,
                             capture_output=True, text=True, timeout=180)
    finally:
        holder.close(autocommit=False)
    assert run.returncode == 3, run.stderr[-3000:]
    [error] = [x for x in run.stderr.splitlines() if x.startswith("error: ")]
    assert "no partition" in error and group in error and "12s" in error, error
    assert committed(kafka_bootstrap, group) == {}
