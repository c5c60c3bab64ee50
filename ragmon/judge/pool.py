"""``JudgePool``: judge many traces at once on up to ``max_in_flight`` threads, results as futures.

Why threads: a judge call is an HTTP round trip that releases the interpreter while it waits, the judge
(``OpenAIJudge`` over a synchronous httpx client) is the very object the gate and the live scorer share, and user
code on the gate's path (answerers, retrievers) is synchronous; docs/judges.md says more. A CPU-bound judge (the
heuristic one says so with ``io_bound = False``) gains nothing from threads, so the pool then runs each call
inline, at once, in the caller's thread. A judge that waits on I/O gets threads even at ``max_in_flight`` 1: the
caller (the score loop) must stay free to notice a stop and keep its consumer alive while a call is slow.

The workers are daemon threads rather than a ``concurrent.futures.ThreadPoolExecutor``, whose workers the
interpreter joins at exit: a call stuck on a slow endpoint must never hold a stopping process past its grace
period. ``close`` abandons what is queued (its futures are cancelled) and lets running calls finish unobserved.
The pool does not bound its queue: its callers do (the score loop stops reading when its window is full, ``map``
keeps at most twice ``max_in_flight`` items queued). Thread-safe.
"""

from __future__ import annotations

import queue
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import CancelledError, Future
from typing import Any, TypeVar

from ragmon.judge.metrics import JudgeMetrics
from ragmon.telemetry import Telemetry

T = TypeVar("T")
R = TypeVar("R")

_STOP = object()


class JudgePool:
    """Runs judge calls on ``max_in_flight`` daemon threads (or inline when ``threaded`` is False)."""

    def __init__(self, max_in_flight: int, *, threaded: bool = True, name: str = "judge",
                 telemetry: Telemetry | None = None):
        if max_in_flight < 1:
            raise ValueError(f"max_in_flight must be at least 1, got {max_in_flight}")
        self.max_in_flight = max_in_flight
        self.threaded = threaded
        self.name = name
        #: the judge's metrics (``ragmon_judge_queue_wait_seconds{stage="pool"}``), registered on ``telemetry`` if given
        self.metrics = telemetry.use(JudgeMetrics) if telemetry is not None else None
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._workers: list[threading.Thread] = []
        self._lock = threading.Lock()
        self._closed = False

    @classmethod
    def for_judge(cls, judge: Any, max_in_flight: int, telemetry: Telemetry | None = None) -> JudgePool:
        """Threads for a judge that waits on I/O (any judge that does not say ``io_bound = False``)."""
        return cls(max_in_flight, threaded=getattr(judge, "io_bound", True), telemetry=telemetry)

    def submit(self, fn: Callable[..., R], *args: Any) -> Future[R]:
        """Run ``fn(*args)``; never blocks (inline mode runs it now). Exceptions end up in the future."""
        future: Future[R] = Future()
        if not self.threaded:
            _run(future, fn, args)
            return future
        with self._lock:
            if self._closed:
                raise RuntimeError(f"the {self.name} pool is closed")
            if not self._workers:
                for i in range(self.max_in_flight):
                    worker = threading.Thread(target=self._work, name=f"ragmon-{self.name}-{i}", daemon=True)
                    worker.start()
                    self._workers.append(worker)
        self._queue.put((future, fn, args, time.monotonic()))
        return future

    def map(self, fn: Callable[[T], R], items: Iterable[T]) -> Iterator[Future[R]]:
        """Futures of ``fn(item)`` in the order of ``items``, each yielded once it is done; at most twice
        ``max_in_flight`` items are submitted ahead of the one being waited for, so memory stays bounded."""
        ahead: deque[Future[R]] = deque()
        window = 2 * self.max_in_flight if self.threaded and self.max_in_flight > 1 else 1
        for item in items:
            ahead.append(self.submit(fn, item))
            if len(ahead) >= window:
                yield _done(ahead.popleft())
        while ahead:
            yield _done(ahead.popleft())

    def close(self) -> None:
        """Stop taking work; cancel what is queued; running calls finish on their own (nobody waits for them)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            workers = len(self._workers)
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                break
            if item is not _STOP:
                item[0].cancel()
        for _ in range(workers):
            self._queue.put(_STOP)

    def _work(self) -> None:
        while True:
            item = self._queue.get()
            if item is _STOP:
                return
            future, fn, args, queued_at = item
            if not future.set_running_or_notify_cancel():
                continue
            if self.metrics is not None:
                self.metrics.judge_queue_wait.labels("pool").observe(time.monotonic() - queued_at)
            _run(future, fn, args, running=True)


def _run(future: Future[Any], fn: Callable[..., Any], args: tuple[Any, ...], running: bool = False) -> None:
    """Run into the future. In a worker (``running``) everything is caught, or the future would never be done;
    inline, Ctrl-C and ``SystemExit`` still reach the caller."""
    if not running and not future.set_running_or_notify_cancel():
        return
    try:
        result = fn(*args)
    except Exception as exc:  # noqa: BLE001 - the caller reads it from the future
        future.set_exception(exc)
    except BaseException as exc:
        if not running:
            raise
        future.set_exception(exc)
    else:
        future.set_result(result)


def _done(future: Future[R]) -> Future[R]:
    try:
        future.exception()  # waits; the caller reads the outcome
    except CancelledError:
        pass  # the caller sees it as cancelled
    return future
