"""The ingest loop's steps on their own: the retry schedule, the batching step, intake's output, lag reporting."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ragmon.config import IngestSettings
from ragmon.pipeline.batcher import Batch, BatchLimits, BatchStep, FlushWait
from ragmon.pipeline.intake import Intake
from ragmon.pipeline.metrics import IngestMetrics
from ragmon.pipeline.offsets import OffsetLedger
from ragmon.stream.backoff import FIRST_SECONDS, Backoff
from ragmon.stream.lag import LagReporter
from ragmon.stream.source import InMemoryTraceSource, RawMessage
from ragmon.telemetry import Telemetry
from tests.support.ingest_rig import FakeClock, trace_bytes

T = "rag.traces"


# -- Backoff --------------------------------------------------------------------------------------------------

def test_retryable_failures_back_off_exponentially_with_jitter_up_to_the_ceiling():
    clock = FakeClock()
    b = Backoff(5.0, clock=clock, rng=random.Random(1))
    delays = [b.failed(retryable=True) for _ in range(10)]
    for attempt, delay in enumerate(delays, start=1):
        wait = min(5.0, FIRST_SECONDS * 2 ** attempt)
        assert wait / 2 <= delay <= wait, f"attempt {attempt}: {delay} outside the jitter range of {wait}"
    assert delays[-1] >= 2.5 and b.attempts == 10
    assert b.retry_at == pytest.approx(clock.now + delays[-1])


def test_a_permanent_failure_waits_at_the_ceiling_from_the_first_attempt():
    b = Backoff(8.0, clock=FakeClock(), rng=random.Random(2))
    assert all(4.0 <= b.failed(retryable=False) <= 8.0 for _ in range(20))


def test_remaining_counts_down_with_the_clock_and_reset_starts_over():
    clock = FakeClock()
    b = Backoff(60.0, clock=clock, rng=random.Random(3))
    assert b.remaining() == 0  # nothing failed: nothing to wait for
    for _ in range(6):
        b.failed(retryable=True)
    delay = b.remaining()
    clock.advance(delay / 2)
    assert b.remaining() == pytest.approx(delay / 2)
    clock.advance(delay)
    assert b.remaining() == 0
    b.reset()
    assert b.attempts == 0 and b.remaining() == 0
    assert b.failed(retryable=True) <= 2 * FIRST_SECONDS  # back to the shortest delay


@given(seed=st.integers(0, 2**32), ceiling=st.floats(0.01, 600), outcomes=st.lists(st.booleans(), max_size=40))
def test_no_delay_ever_exceeds_the_ceiling(seed, ceiling, outcomes):
    b = Backoff(ceiling, clock=FakeClock(), rng=random.Random(seed))
    assert all(0 < b.failed(retryable) <= ceiling for retryable in outcomes)


# -- BatchStep ------------------------------------------------------------------------------------------------

class Writes:
    """The next step: records the batches it took; refuses them while ``refuse`` is set."""

    def __init__(self) -> None:
        self.taken: list[Batch] = []
        self.refuse = False

    def submit(self, batch: Batch) -> bool:
        if self.refuse:
            return False
        self.taken.append(batch)
        return True


def intake(ledger: OffsetLedger | None = None) -> Intake:
    return Intake(IngestSettings(), Telemetry().use(IngestMetrics), ledger or OffsetLedger(), input_format="auto",
                  retention_days=90, clock=FakeClock())


def messages(n: int, bad_every: int = 0) -> list[RawMessage]:
    return [RawMessage(T, 0, i, b"{nope" if bad_every and i % bad_every == 0 else trace_bytes(trace_id=f"t{i}"))
            for i in range(n)]


def test_a_batch_is_handed_on_exactly_when_full_and_the_rest_starts_the_next_one():
    writes = Writes()
    step = BatchStep(BatchLimits(4, 1 << 30, 10.0), writes, FakeClock())
    step.submit(intake().handle(messages(10, bad_every=3)))  # dead letters count towards the limit too
    assert [len(b) + len(b.dead_letters) for b in writes.taken] == [4, 4]
    assert len(step.batch) + len(step.batch.dead_letters) == 2
    offsets = [sorted(o for r in b.ranges.values() for o in r) for b in writes.taken]
    assert offsets == [[0, 3], [4, 7]]  # in message order


def test_a_refused_batch_keeps_buffering_and_is_handed_on_when_due():
    writes, clock = Writes(), FakeClock()
    step = BatchStep(BatchLimits(3, 1 << 30, 1.0), writes, clock)
    writes.refuse = True
    step.submit(intake().handle(messages(5)))
    assert writes.taken == [] and len(step.batch) == 5
    assert step.due(clock.now)  # full: due at once
    writes.refuse = False
    assert step.hand_on() and len(writes.taken[0]) == 5 and step.empty


def test_the_wait_until_due_is_infinite_while_empty_and_counts_from_when_the_batch_was_opened():
    clock, writes = FakeClock(), Writes()
    step = BatchStep(BatchLimits(100, 1 << 30, 1.0), writes, clock)
    clock.advance(50)
    assert step.wait_seconds(clock.now) == float("inf")
    step.submit(intake().handle(messages(1)))
    assert step.wait_seconds(clock.now) == 0 and step.due(clock.now)  # opened long ago: written at once
    assert step.hand_on()
    step.submit(intake().handle(messages(1)))
    clock.advance(0.25)
    assert step.wait_seconds(clock.now) == pytest.approx(0.75) and not step.due(clock.now)


def test_without_a_freshness_target_every_batch_waits_the_flush_interval():
    wait = FlushWait(1.0)
    wait.observe(5.0)
    assert wait.seconds() == 1.0


def test_with_a_freshness_target_the_wait_is_what_the_target_leaves_after_the_slowest_recent_insert():
    wait = FlushWait(1.0, 3.0)
    assert wait.seconds() == pytest.approx(3.0 - 1.0 - FlushWait.MARGIN_SECONDS)  # no insert yet: as if one took 1 s
    wait.observe(0.1)
    assert wait.seconds() == pytest.approx(3.0 - 0.1 - FlushWait.MARGIN_SECONDS)  # fast inserts: longer batches
    wait.observe(2.5)
    assert wait.seconds() == 1.0  # a slow store: never below the flush interval
    for _ in range(FlushWait.WINDOW):
        wait.observe(0.0)
    assert wait.seconds() == pytest.approx(3.0 - FlushWait.MARGIN_SECONDS)  # the slow insert left the window
    assert FlushWait(5.0, 2.0).seconds() == 2.0  # never past the target, even below the flush interval


def test_each_batch_keeps_the_wait_it_was_opened_with():
    clock, writes, wait = FakeClock(), Writes(), FlushWait(1.0, 4.0)
    for _ in range(FlushWait.WINDOW):
        wait.observe(0.75)
    step = BatchStep(BatchLimits(100, 1 << 30, 1.0), writes, clock, wait)
    assert step.batch.limits.max_wait_seconds == pytest.approx(3.0)
    step.submit(intake().handle(messages(1)))
    wait.observe(3.0)  # a slow insert meanwhile: the open batch keeps its wait, the next one is shorter
    clock.advance(2.5)
    assert not step.due(clock.now) and step.wait_seconds(clock.now) == pytest.approx(0.5)
    clock.advance(0.5)
    assert step.due(clock.now) and step.hand_on()
    assert step.batch.limits.max_wait_seconds == 1.0


# -- Intake ---------------------------------------------------------------------------------------------------

def test_intake_produces_traces_and_dead_letters_in_message_order_and_tracks_each_message():
    ledger = OffsetLedger()
    out = list(intake(ledger).handle(messages(4, bad_every=2)))
    # (dead letter, entries, kind settled) / (trace, source, size, entries, kind settled)
    assert [len(item) for item in out] == [3, 5, 3, 5] and {item[-1] for item in out} == {"message"}
    assert out[0][0].reason == "invalid_json" and out[1][0].trace_id == "t1"
    assert [item[-2][0].offset for item in out] == [0, 1, 2, 3]
    assert ledger.pending() == 4 and not ledger.committable()  # nothing is safe until a later step releases it


def test_intake_is_lazy_a_message_is_handled_when_its_output_is_asked_for():
    ledger = OffsetLedger()
    produced = intake(ledger).handle(messages(3))
    assert ledger.pending() == 0
    next(produced)
    assert ledger.pending() == 1


def test_redaction_counts_are_taken_once():
    i = intake()
    list(i.handle([RawMessage(T, 0, 0, trace_bytes(question="mail ann@example.com"))]))
    assert i.take_redaction_counts() == {"email": 1}
    assert i.take_redaction_counts() == {}


# -- lag ------------------------------------------------------------------------------------------------------

def lag_samples(t: Telemetry) -> dict[str, float]:
    return {s.labels["partition"]: s.value for m in t.registry.collect()
            if m.name == "ragmon_ingest_consumer_lag_messages" for s in m.samples}


def test_lag_is_read_at_most_every_interval_and_caught_up_needs_every_assigned_partition_at_zero():
    source, t = InMemoryTraceSource(), Telemetry()
    source.append(T, 0, [b"a", b"b"])
    source.append(T, 1, [b"c"])
    lag = LagReporter(source, t.use(IngestMetrics).ingest_consumer_lag, interval_seconds=2.0)
    lag.maybe_update(100.0)
    assert lag_samples(t) == {"0": 2, "1": 1} and not lag.caught_up()
    source.poll(0, 10)
    lag.maybe_update(101.0)  # within the interval: the last reading stands
    assert lag_samples(t) == {"0": 2, "1": 1}
    lag.maybe_update(102.0)
    assert lag_samples(t) == {"0": 0, "1": 0} and lag.caught_up()


def test_a_partition_given_away_loses_its_series_and_caught_up_is_false_with_nothing_assigned():
    source, t = InMemoryTraceSource(), Telemetry()
    source.append(T, 0, [b"a"])
    source.append(T, 1, [b"b"])
    lag = LagReporter(source, t.use(IngestMetrics).ingest_consumer_lag)
    lag.update()
    lag.drop({(T, 1)})
    assert set(lag_samples(t)) == {"0"}
    del source.partitions[(T, 0)], source.partitions[(T, 1)]
    lag.update()
    assert lag_samples(t) == {} and not lag.caught_up()
