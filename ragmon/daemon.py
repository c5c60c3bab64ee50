"""Running daemon loops in threads, and what a role package hands the process assembler.

A loop (``Role``) is anything with a ``name`` and a blocking ``run(stop: threading.Event)`` that returns soon
after ``stop`` is set. ``PeriodicRole`` wraps a function called every ``interval_seconds`` (drift checks, shadow
comparisons, weekly review selection). ``Daemon`` starts each loop in its own thread and on SIGTERM/SIGINT sets
the stop event and joins every loop within the grace period. A loop that raises is logged and restarted after
a pause: one failing loop never takes the others down. ``RoleParts`` is what each ``<role>/role.py: build``
returns: its loops, its health checks, its routers and ports of its own, for ``ragmon.process`` to run. A consumer
loop (ingest, outcomes, score) also publishes a ``ConsumerState`` after each step, for ``--exit-when-idle``.

Must not open a store, bind a port or read settings: ``ragmon.process`` does that.
"""

from __future__ import annotations

import ctypes
import gc
import logging
import os
import platform
import signal
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from ragmon.server import Check

log = logging.getLogger("ragmon.daemon")

#: young-generation threshold of the cyclic garbage collector in a long-running daemon (Python's default: 700)
GC_YOUNG_THRESHOLD = 20_000


def tune_gc() -> None:
    """Keep the cyclic garbage collector off the hot loops of a long-running daemon.

    Start-up leaves ~250,000 long-lived objects (the imported libraries); every full collection walks them
    all (~75 ms here), and the ingest loop, which keeps a batch's offset ledger alive, triggered one every
    ~7,000 traces: ~16 µs per trace, measured with ``gc.callbacks``. ``gc.freeze()`` moves what exists after
    start-up out of the collector's sight, and a higher young threshold makes collections rarer. Objects in
    cycles are still collected; reference counting, which frees nearly everything, is unaffected.
    """
    gc.collect()
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(GC_YOUNG_THRESHOLD, middle, old)


#: glibc ``mallopt`` parameters and the values a daemon sets (see ``tune_malloc``)
M_TRIM_THRESHOLD, M_TOP_PAD, M_MMAP_THRESHOLD = -1, -2, -3
MALLOC_OPTIONS = {M_MMAP_THRESHOLD: 32 << 20, M_TRIM_THRESHOLD: 256 << 20, M_TOP_PAD: 64 << 20}


def tune_malloc() -> bool:
    """Let glibc's allocator reuse the memory of large buffers instead of handing it back to the OS at once.

    kafka-python reads fetch responses into buffers of up to a few MB, and the ingest batch is one buffer of up
    to ``max_batch_bytes``. By default glibc serves blocks above 128 KiB (a threshold that adapts to what was
    freed) with ``mmap`` and unmaps them when freed, and it trims the heap above 128 KiB of free space, so
    every new buffer is fresh memory that the kernel zeroes page by page. In the ingest benchmark that was
    ~450,000 page faults per 80,000 traces; with blocks up to 32 MiB taken from the heap, 256 MiB of free
    heap kept and 64 MiB of padding per heap growth, ~190,000–300,000, 5–7 µs less CPU per trace, 5–15 % more
    traces/s, at 40–70 MB more peak RSS (docs/ingest.md, "Memory"). Returns False, changing nothing, where the
    C library is not glibc or the environment says ``RAGMON_TUNE_MALLOC=0`` (glibc's defaults, or its
    ``MALLOC_*_`` environment variables, then apply).
    """
    if os.environ.get("RAGMON_TUNE_MALLOC", "1").strip() == "0" or platform.libc_ver()[0] != "glibc":
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return all(mallopt(param, value) == 1 for param, value in MALLOC_OPTIONS.items())


class Role(Protocol):
    """A daemon role. ``run`` blocks until ``stop`` is set; it must return within the shutdown grace period.

    A role that can never work again as configured (the ingest source's ``FatalSourceError``) returns with a
    ``fatal_error`` attribute set: the daemon then stops every role, so a process with a dead role does not
    look alive, and the command exits ``EXIT_FATAL`` naming it."""

    name: str

    def run(self, stop: threading.Event) -> None: ...


@dataclass(frozen=True, slots=True)
class ConsumerState:
    """A consumer loop's progress as its own thread saw it at the end of a step. The loop replaces its
    ``consumer_state`` attribute with a new one after each step, so a reader in another thread (the
    ``--exit-when-idle`` watch) always sees one consistent reading and never touches the loop's own state."""

    #: messages read so far
    consumed: int = 0
    #: nothing buffered, in flight or waiting for a retry, and every consumed offset committed
    settled: bool = True
    #: partitions were assigned to this consumer at the last lag reading
    assigned: bool = False
    #: ... and the lag was zero on each of them
    caught_up: bool = False
    #: why the loop's last write failed while it waits to write again (None: writes succeed)
    write_error: str | None = None


@dataclass(frozen=True)
class Listener:
    """A port of a role's own, beside the process's shared one: ``routers`` served on ``host:port`` (the OTLP/HTTP
    receiver's 4318). ``name`` is the settings section holding ``host`` and ``port``, named when the port cannot be
    bound; ``path`` is what a start-up line shows."""

    name: str
    host: str
    port: int
    routers: tuple[Any, ...]
    path: str = "/"


@dataclass(frozen=True)
class RoleParts:
    """What a role package's ``build`` hands the process assembler (``ragmon.process``).

    ``loops`` run in the daemon's threads. The assembler registers ``liveness`` (when given) with the loops'
    threads as the ``/healthz`` check ``<role>_loop`` and ``readiness`` as the ``/readyz`` check ``<role>``,
    mounts ``routers`` on the process's one HTTP port, serves each of ``listeners`` on its own, and names ``on_stuck``
    (what a loop still running after the grace period means) in its report. ``service`` is the role's own object, for
    the command that started it to report from afterwards (the ingest pipeline's stats, the score role's result).
    """

    loops: tuple[Role, ...]
    service: Any = None
    liveness: Check | None = None
    readiness: Check | None = None
    routers: tuple[Any, ...] = ()
    listeners: tuple[Listener, ...] = ()
    on_stuck: str = ""


@dataclass
class PeriodicRole:
    """Calls ``fn()`` now and then every ``interval_seconds`` until stopped. Failures are logged, not fatal."""

    name: str
    interval_seconds: float
    fn: Callable[[], object]
    run_at_start: bool = True
    last_success: float | None = None
    last_error: str | None = None

    def run(self, stop: threading.Event) -> None:
        if not self.run_at_start and stop.wait(self.interval_seconds):
            return
        while not stop.is_set():
            try:
                self.fn()
                self.last_success = time.time()
                self.last_error = None
            except Exception as exc:  # noqa: BLE001 - a periodic job failing must not kill the daemon
                self.last_error = f"{type(exc).__name__}: {exc}"
                log.exception("role %s failed; retrying in %.0fs", self.name, self.interval_seconds)
            if stop.wait(self.interval_seconds):
                return


@dataclass
class Daemon:
    """Runs roles in threads until a signal (or ``stop()``) arrives."""

    roles: list[Role]
    grace_seconds: float = 20.0
    restart_pause_seconds: float = 5.0
    stop_event: threading.Event = field(default_factory=threading.Event)
    _threads: dict[str, threading.Thread] = field(default_factory=dict)
    _beats: dict[str, float] = field(default_factory=dict)

    def alive(self) -> dict[str, bool]:
        return {name: t.is_alive() for name, t in self._threads.items()}

    def liveness_check(self) -> tuple[bool, str]:
        dead = [name for name, ok in self.alive().items() if not ok]
        return (not dead, "all roles running" if not dead else f"stopped: {', '.join(dead)}")

    def start(self) -> None:
        for role in self.roles:
            thread = threading.Thread(target=self._supervise, args=(role,), name=f"ragmon-{role.name}", daemon=True)
            self._threads[role.name] = thread
            thread.start()

    def _supervise(self, role: Role) -> None:
        # run at least once, even when the stop came first: a loop closes what it holds on its way out (the OTLP/HTTP
        # loop stores the requests its port accepted before the loop started)
        first = True
        while first or not self.stop_event.is_set():
            first = False
            try:
                role.run(self.stop_event)
                if getattr(role, "fatal_error", None) is not None:
                    log.error("role %s stopped for good: %s; stopping the process", role.name, role.fatal_error)
                    self.stop_event.set()
                return
            except Exception:  # noqa: BLE001
                log.exception("role %s crashed; restarting in %.0fs", role.name, self.restart_pause_seconds)
                if self.stop_event.wait(self.restart_pause_seconds):
                    return

    def stop(self) -> list[str]:
        """Signal every role and wait for them within the grace period; return the names still running."""
        self.stop_event.set()
        deadline = time.monotonic() + self.grace_seconds
        for thread in self._threads.values():
            thread.join(max(0.0, deadline - time.monotonic()))
        return [name for name, t in self._threads.items() if t.is_alive()]

    def run_until_signal(self, signals: Iterable[int] = (signal.SIGTERM, signal.SIGINT)) -> list[str]:
        """Start, block until a signal arrives (or every loop has ended), then stop. Must be called from the main
        thread. The previous signal handlers are back once the loops are stopped (a second signal during the
        grace period changes nothing)."""
        previous = {sig: signal.signal(sig, lambda *_: self.stop_event.set()) for sig in signals}
        try:
            tune_gc()
            tune_malloc()
            self.start()
            while not self.stop_event.wait(0.5):
                if self._threads and not any(t.is_alive() for t in self._threads.values()):
                    break
            return self.stop()
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
