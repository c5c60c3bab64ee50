"""``IdleRule``: when ``--exit-when-idle`` calls a consumer done, or gives up on it (readings and times given)."""

from __future__ import annotations

from ragmon.cli.idle_watch import IdleRule
from ragmon.daemon import ConsumerState

DONE = ConsumerState(consumed=10, settled=True, assigned=True, caught_up=True)
UNASSIGNED = ConsumerState(consumed=0, settled=True, assigned=False, caught_up=False)


def verdicts(rule: IdleRule, readings: list[tuple[float, ConsumerState]]) -> list[str | None]:
    return [rule.observe(state, t) for t, state in readings]


def test_idle_only_after_the_whole_period_assigned_caught_up_settled_and_reading_nothing():
    rule = IdleRule(idle_seconds=2, unassigned_limit_seconds=60)
    assert verdicts(rule, [(0, DONE), (1.9, DONE), (2.0, DONE)]) == [None, None, "idle"]


def test_time_without_a_message_while_not_assigned_is_not_idle():
    # a killed member holds the partitions until its session times out: nothing is read, nothing is owned
    rule = IdleRule(idle_seconds=2, unassigned_limit_seconds=20)
    waiting = [(t, UNASSIGNED) for t in range(0, 15)]
    assigned = ConsumerState(consumed=0, settled=True, assigned=True, caught_up=False)  # lag not read yet
    working = ConsumerState(consumed=60, settled=False, assigned=True, caught_up=False)
    done = ConsumerState(consumed=60, settled=True, assigned=True, caught_up=True)
    out = verdicts(rule, [*waiting, (15, assigned), (16, working), (17, done), (18, done)])
    assert out == [None] * 18 + ["idle"]  # two seconds after the last of the work, not after the first 2 s


def test_anything_read_lag_left_or_work_unsettled_restarts_the_period():
    rule = IdleRule(idle_seconds=2, unassigned_limit_seconds=60)
    more = ConsumerState(consumed=11, settled=True, assigned=True, caught_up=True)
    behind = ConsumerState(consumed=11, settled=True, assigned=True, caught_up=False)
    unsettled = ConsumerState(consumed=11, settled=False, assigned=True, caught_up=True)
    even_more = ConsumerState(consumed=12, settled=True, assigned=True, caught_up=True)
    readings = [(0, DONE), (1.5, more), (3, behind), (4.5, unsettled), (6, even_more), (7.9, even_more),
                (8, even_more)]
    assert verdicts(rule, readings) == [None, None, None, None, None, None, "idle"]


def test_no_partition_for_the_limit_gives_up_and_a_partition_in_time_resets_it():
    rule = IdleRule(idle_seconds=2, unassigned_limit_seconds=12)
    assert verdicts(rule, [(0, UNASSIGNED), (11.9, UNASSIGNED), (12, UNASSIGNED)]) == [None, None, "unassigned"]
    rule = IdleRule(idle_seconds=100, unassigned_limit_seconds=12)
    revoked_later = [(0, UNASSIGNED), (10, DONE), (11, UNASSIGNED), (22.9, UNASSIGNED), (23, UNASSIGNED)]
    assert verdicts(rule, revoked_later) == [None, None, None, None, "unassigned"]
