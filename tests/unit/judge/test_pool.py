"""JudgePool: up to max_in_flight calls at once, results in order, inline for a CPU-bound judge."""

from __future__ import annotations

import threading

import pytest

from ragmon.judge import HeuristicJudge
from ragmon.judge.pool import JudgePool


def test_runs_up_to_max_in_flight_at_once_and_no_more():
    pool = JudgePool(4)
    barrier = threading.Barrier(4, timeout=30)  # passes only if four calls run at the same time
    lock, running, peak = threading.Lock(), [0], [0]

    def call(i):
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
        barrier.wait()
        with lock:
            running[0] -= 1
        return i * i

    assert [f.result() for f in pool.map(call, range(16))] == [i * i for i in range(16)]
    assert peak[0] == 4
    pool.close()


def test_exceptions_come_back_in_the_future():
    pool = JudgePool(2)

    def boom():
        raise ValueError("judge broke")

    with pytest.raises(ValueError, match="judge broke"):
        pool.submit(boom).result(timeout=30)
    pool.close()


def test_a_cpu_bound_judge_runs_inline_in_the_callers_thread():
    pool = JudgePool.for_judge(HeuristicJudge(), 8)
    assert not pool.threaded
    future = pool.submit(threading.get_ident)
    assert future.done() and future.result() == threading.get_ident()


def test_close_cancels_what_is_queued_and_does_not_wait_for_running_calls():
    pool = JudgePool(2)
    release = threading.Event()
    started = threading.Semaphore(0)

    def stuck():
        started.release()
        release.wait(30)

    running = [pool.submit(stuck) for _ in range(2)]
    assert started.acquire(timeout=30) and started.acquire(timeout=30)
    queued = pool.submit(stuck)
    pool.close()  # returns at once
    assert queued.cancelled() and not any(f.done() for f in running)
    release.set()
    assert all(f.result(timeout=30) is None for f in running)
    with pytest.raises(RuntimeError, match="closed"):
        pool.submit(stuck)
