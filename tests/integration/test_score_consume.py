"""The consume loop's batching and commit order, with a scripted in-memory source and the real chDB store."""

from __future__ import annotations

import threading

from ragmon.errors import PermanentStoreError, SourceError
from ragmon.judge import HeuristicJudge
from ragmon.sampling.sampler import ScoreSampler
from ragmon.score.pipeline import LiveScorer
from ragmon.score.runner import consume
from tests.conftest import make_trace


class InMemorySource:
    """Scripted polls: a list of trace lists (an empty list = an empty poll). Records commits."""

    def __init__(self, polls, store=None, fail_commit: bool = False):
        self.polls, self.store, self.fail_commit = list(polls), store, fail_commit
        self.commits: list[int] = []  # stored score rows at each commit
        self.polled = 0

    def poll(self):
        if not self.polls:
            return [], None
        batch = self.polls.pop(0)
        if not batch:
            return [], None
        self.polled += 1
        return batch, f"p/0/{self.polled}"

    def commit(self):
        if self.fail_commit:
            raise SourceError("offset commit failed: rebalance in progress")
        n = self.store.command(f"SELECT count() FROM {self.store.table('sampling_decisions')}") if self.store else 0
        self.commits.append(int(n))


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
                     idle_exit_seconds=0.15, clock=Clock())
    assert result.scored == 9
    assert source.commits == [6, 9]  # every commit saw its rows already stored


def test_flush_interval_bounds_latency(store):
    source = InMemorySource([traces(1) for _ in range(5)] + [[]], store)
    scorer = LiveScorer(store, HeuristicJudge(), ScoreSampler(salt="c", rate=1.0))
    consume(scorer, source, stop=threading.Event(), max_batch=1000, flush_interval_seconds=0.25,
            idle_exit_seconds=0.05, clock=Clock())
    assert source.commits == [4, 5]  # clock ticks 0.1 per poll: the 4th poll is 0.3 after the first


def test_stop_flushes_and_commits_the_buffer(store):
    stop = threading.Event()

    class Stopping(InMemorySource):
        def poll(self):
            out = super().poll()
            stop.set()
            return out

    source = Stopping([traces(4)], store)
    consume(LiveScorer(store, HeuristicJudge(), ScoreSampler(salt="c", rate=1.0)), source, stop=stop,
            max_batch=1000, flush_interval_seconds=100, clock=Clock())
    assert source.commits == [4]


def test_commit_failure_after_rebalance_is_not_fatal(store):
    source = InMemorySource([traces(2), []], store, fail_commit=True)
    result = consume(LiveScorer(store, HeuristicJudge(), ScoreSampler(salt="c", rate=1.0)), source,
                     stop=threading.Event(), max_batch=2, idle_exit_seconds=0.05, clock=Clock())
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
