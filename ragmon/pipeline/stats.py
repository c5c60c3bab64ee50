"""What one ingest loop did: counters and timestamps its steps add to, read by tests, the CLI and the benchmark.

Owns the ``IngestStats`` record only. The steps (``loop.py``, ``write_step.py``, ``commit_step.py``) update
it; the writer thread does too, so a reader from another thread sees each field as it was at some moment
(plain ints and floats: no lock, no torn values). It must not hold behaviour.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field


@dataclass
class IngestStats:
    """What the loop did (for tests, the shutdown log and the benchmark)."""

    consumed: int = 0
    stored: int = 0
    dead_letters: Counter[str] = field(default_factory=Counter)
    batches: int = 0
    retries: int = 0
    commits: int = 0
    revocations: int = 0
    first_data_at: float | None = None   # wall-clock time the first message arrived
    last_write_at: float | None = None   # wall-clock time of the last acknowledged write
    first_data_cpu: float | None = None  # process CPU seconds (all threads) at first_data_at
    last_write_cpu: float | None = None  # process CPU seconds at last_write_at (the benchmark's CPU per trace)
    last_error: str | None = None        # the last failed poll or write (for /readyz)
    #: given up unwritten when partitions were revoked while writes failed (a Kafka rebalance, or the end of a
    #: ``--file`` run): valid traces not stored, and dead letters not written, by reason. Never counted in
    #: ``stored`` / ``dead_letters``; their offsets stay uncommitted, so they are read again (by the partition's
    #: next owner, or by running the same ``--file`` command again)
    abandoned_traces: int = 0
    abandoned_dead_letters: Counter[str] = field(default_factory=Counter)
