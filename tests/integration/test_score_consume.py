"""The consume loop's batching and commit order, with a scripted in-memory source and the real chDB store."""

from __future__ import annotations

import threading

from ragmon.errors import PermanentStoreError, SourceError
from ragmon.judge import HeuristicJudge
from ragmon.sampling.sampler import ScoreSampler
from ragmon.score.pipeline import LiveScorer
from ragmon.score.runner import consume
from ragmon.score.sources import Polled
from tests.conftest import make_trace
from tests.integration.ingest_support import wait_for


class InMemorySource:
    """Scripted polls of one partition: a list of trace lists (an empty list = an empty poll). Records each commit
    as (offset, sampling decisions stored at that moment); while paused, a poll returns nothing."""

    def __init__(self, polls, store=None, fail_commit: bool = False):
        self.polls, self.store, self.fail_commit = list(polls), store, fail_commit
        self.commits: list[tuple[int, int]] = []
        self.offset = 0
        self.paused = False
        self.pauses = 0

    def poll(self, timeout_seconds=None):
        if self.paused or not self.polls:
            return []
        out = []
        for trace in self.polls.pop(0):
            out.append(Polled(("traces", 0), self.offset, trace))
            self.offset += 1
        return out

    def commit(self, offsets):
        if self.fail_commit:
            raise SourceError("offset commit failed: rebalance in progress")
        n = self.store.command(f"SELECT count() FROM {self.store.table('sampling_decisions')}") if self.store else 0
        self.commits.append((offsets[("traces", 0)], int(n)))

    def pause(self):
        self.paused = True
        self.pauses += 1

    def resume(self):
        self.paused = False


class Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        self.t += 0.1
        return self.t


def traces(n):
    return [make_trace() for _ in range(n)]


def test_buffers_until_max_batch_and_commits_after_the_store(store):
    source = InMemorySource([traces(3), traces(3), traces(3), [], []], store)
    scorer = LiveScorer(store, HeuristicJudge(), ScoreSampler(salt="c", rate=1.0))
    result = consume(scorer, source, stop=threading.Event(), max_batch=6, flush_interval_seconds=100,
                     until=lambda: not source.polls, clock=Clock())
    assert result.scored == 9
    assert source.commits == [(6, 6), (9, 9)]  # every commit saw its rows already stored


def test_flush_interval_bounds_latency(store):
    source = InMemorySource([traces(1) for _ in range(5)] + [[]], store)
    scorer = LiveScorer(store, HeuristicJudge(), ScoreSampler(salt="c", rate=1.0))
    consume(scorer, source, stop=threading.Event(), max_batch=1000, flush_interval_seconds=0.25,
            until=lambda: not source.polls, clock=Clock())
    # the clock ticks 0.1 a reading: the interval runs out before the 5th poll and a write goes out early
    assert len(source.commits) == 2 and source.commits[0][0] < 5 and source.commits[-1] == (5, 5)
    assert all(offset <= stored for offset, stored in source.commits)


def test_stop_flushes_and_commits_the_buffer(store):
    stop = threading.Event()

    class Stopping(InMemorySource):
        def poll(self, timeout_seconds=None):
            out = super().poll(timeout_seconds)
            stop.set()
            return out

    source = Stopping([traces(4)], store)
    consume(LiveScorer(store, HeuristicJudge(), ScoreSampler(salt="c", rate=1.0)), source, stop=stop,
            max_batch=1000, flush_interval_seconds=100, clock=Clock())
    assert source.commits == [(4, 4)]


def test_commit_failure_after_rebalance_is_not_fatal(store):
    source = InMemorySource([traces(2), []], store, fail_commit=True)
    result = consume(LiveScorer(store, HeuristicJudge(), ScoreSampler(salt="c", rate=1.0)), source,
                     stop=threading.Event(), max_batch=2, until=lambda: not source.polls, clock=Clock())
    assert result.scored == 2


def test_store_failure_propagates_without_commit(store):
    class BrokenStore:
        def __getattr__(self, name):
            return getattr(store, name)

        def insert_columns(self, *a, **k):
            raise PermanentStoreError("insert into scores failed: table is gone")

    source = InMemorySource([traces(2)], store)
    scorer = LiveScorer(BrokenStore(), HeuristicJudge(), ScoreSampler(salt="c", rate=1.0))
    try:
        consume(scorer, source, stop=threading.Event(), max_batch=2, clock=Clock())
    except PermanentStoreError:
        pass
    else:
        raise AssertionError("a permanent store error must stop the loop")
    assert source.commits == []


# -- many judge calls in flight ---------------------------------------------------------------------------------

class GatedJudge(HeuristicJudge):
    """The heuristic judge, run in threads, where a trace whose id is in ``held`` waits until released."""

    io_bound = True

    def __init__(self, held=()):
        super().__init__()
        self.gates = {t: threading.Event() for t in held}
        self.running = 0
        self.peak = 0
        self._lock = threading.Lock()

    def assess(self, item):
        with self._lock:
            self.running += 1
            self.peak = max(self.peak, self.running)
        try:
            gate = self.gates.get(item.trace_id)
            if gate is not None:
                assert gate.wait(60), "the test never released this trace"
            return super().assess(item)
        finally:
            with self._lock:
                self.running -= 1


def run_in_thread(**kw):
    stop = threading.Event()
    out = {}
    thread = threading.Thread(target=lambda: out.setdefault("result", consume(stop=stop, **kw)), daemon=True)
    thread.start()
    return stop, thread, out


def scored_ids(store):
    return {r["trace_id"] for r in store.query_rows(f"SELECT DISTINCT trace_id FROM {store.table('scores')} FINAL")}


def test_out_of_order_judgements_never_commit_past_an_unjudged_trace(store):
    batch = traces(6)
    judge = GatedJudge(held=[batch[0]["trace_id"]])  # the oldest trace is the slow one
    source = InMemorySource([batch], store)
    scorer = LiveScorer(store, judge, ScoreSampler(salt="c", rate=1.0), max_in_flight=4)
    stop, thread, out = run_in_thread(scorer=scorer, source=source, max_batch=100, flush_interval_seconds=0.05)
    later = {t["trace_id"] for t in batch[1:]}
    wait_for(lambda: later <= scored_ids(store), 60, "the five later traces to be stored")
    assert batch[0]["trace_id"] not in scored_ids(store)
    assert source.commits and all(offset == 0 for offset, _ in source.commits), source.commits
    judge.gates[batch[0]["trace_id"]].set()
    wait_for(lambda: source.commits[-1][0] == 6, 60, "the commit past the slow trace")
    stop.set()
    thread.join(30)
    assert out["result"].scored == 6 and len(scored_ids(store)) == 6


def test_judges_behind_pause_fetching_so_memory_stays_bounded(store):
    polls = [traces(10) for _ in range(20)]
    judge = GatedJudge(held=[t["trace_id"] for poll in polls for t in poll])  # nothing finishes until released
    source = InMemorySource(polls, store)
    scorer = LiveScorer(store, judge, ScoreSampler(salt="c", rate=1.0), max_in_flight=3)
    stop, thread, out = run_in_thread(scorer=scorer, source=source, max_batch=100, flush_interval_seconds=0.05,
                                      until=lambda: not source.polls)
    wait_for(lambda: source.pauses >= 1 and judge.running == 3, 60, "the loop to pause with three calls running")
    # window 2 x 3 = 6 traces waiting for the judges, reached inside one poll of 10: no second poll was taken
    assert source.offset == 10 and judge.peak == 3
    for gate in judge.gates.values():
        gate.set()
    thread.join(120)
    assert not thread.is_alive() and out["result"].scored == 200 and source.commits[-1][0] == 200
    assert judge.peak == 3


def test_stop_abandons_calls_still_running_and_commits_only_what_is_stored(store):
    batch = traces(5)
    stuck = batch[2]["trace_id"]
    judge = GatedJudge(held=[stuck])
    source = InMemorySource([batch], store)
    scorer = LiveScorer(store, judge, ScoreSampler(salt="c", rate=1.0), max_in_flight=4)
    stop, thread, out = run_in_thread(scorer=scorer, source=source, max_batch=100, flush_interval_seconds=10,
                                      drain_seconds=0.5)
    wait_for(lambda: judge.running == 1 and source.offset == 5, 60, "four traces judged, one stuck")
    stop.set()
    thread.join(30)
    assert not thread.is_alive(), "stop must not wait for a stuck judge call"
    assert scored_ids(store) == {t["trace_id"] for t in batch} - {stuck}
    assert source.commits[-1][0] == 2  # up to the stuck trace, not past it: it is scored again on the next start
    judge.gates[stuck].set()
