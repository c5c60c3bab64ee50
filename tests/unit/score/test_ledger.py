"""ScoreLedger: whatever order judgements finish in, a commit never passes a trace whose rows are not stored."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from ragmon.score.ledger import ScoreLedger


@given(st.lists(st.integers(0, 2), min_size=1, max_size=60), st.randoms(use_true_random=False))
def test_commits_stop_at_the_oldest_unstored_offset_in_every_partition(partitions, rng):
    ledger = ScoreLedger()
    base = {0: 100, 1: 0, 2: 7}
    tickets = []
    for p in partitions:
        tickets.append(ledger.read(p, base[p]))
        base[p] += 1
    order = list(range(len(tickets)))
    rng.shuffle(order)
    stored: set[int] = set()
    committed: dict[int, int] = {}
    for i in order[: rng.randint(0, len(order))]:
        ledger.stored(tickets[i])
        stored.add(i)
        offsets = ledger.committable()
        ledger.committed(offsets)
        committed.update(offsets)
        for p, offset in committed.items():
            unstored = [t.offset for j, t in enumerate(tickets) if t.partition == p and j not in stored]
            assert offset == (min(unstored) if unstored else base[p])
    assert ledger.pending == len(tickets) - len(stored)


def test_nothing_read_since_the_last_commit_commits_nothing():
    ledger = ScoreLedger()
    ledger.stored(ledger.read("p", 5))
    assert ledger.committable() == {"p": 6}
    ledger.committed({"p": 6})
    assert ledger.committable() == {}


def test_a_partition_read_again_from_an_older_offset_starts_a_new_record():
    ledger = ScoreLedger()
    old = ledger.read("p", 10)  # still being judged when the partition came back from a rebalance at 8
    again = ledger.read("p", 8)
    ledger.stored(again)
    assert ledger.committable() == {"p": 9}
    ledger.stored(old)  # resolves harmlessly
    assert ledger.committable() == {"p": 9}


def test_forgotten_partitions_commit_nothing():
    ledger = ScoreLedger()
    ledger.read("a", 0)
    ledger.stored(ledger.read("b", 0))
    ledger.forget({"a"})
    assert ledger.committable() == {"b": 1} and ledger.partitions() == {"b"}
