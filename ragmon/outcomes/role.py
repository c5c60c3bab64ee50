"""The ``outcomes`` role as a process starts it: the outcome-event loop over ``ab.outcomes_topic``.

``check(settings)`` and ``build(settings, store, telemetry) -> RoleParts`` have the shape of every role's
``role.py``; the loop is ``loop.OutcomeLoop``, with the trace loop's guarantees. ``ragmon run`` starts it with
``roles.outcomes`` (off by default: only an A/B cohort sends outcome events); ``ragmon ingest --outcomes`` runs
the same loop on its own. Everything checkable before the loop starts is checked here (topics, the broker), so a
bad setup fails at start-up. Must not open the store or bind a port.
"""

from __future__ import annotations

from typing import Any

from ragmon.config import Settings
from ragmon.daemon import RoleParts
from ragmon.errors import ConfigError
from ragmon.outcomes.loop import open_outcome_loop
from ragmon.server import heartbeat_check
from ragmon.telemetry import Telemetry


def check(settings: Settings) -> None:
    """Raise ``ConfigError`` when the outcome topics collide with each other or with the traces' topics."""
    ab, kafka = settings.ab, settings.kafka
    problems = []
    if ab.outcomes_dead_letter_topic == ab.outcomes_topic:
        problems.append("ab.outcomes_dead_letter_topic: must differ from ab.outcomes_topic (dead letters would be "
                        "re-read)")
    if ab.outcomes_topic in (kafka.topic, kafka.dead_letter_topic):
        problems.append(f"ab.outcomes_topic: {ab.outcomes_topic!r} is a traces topic too; outcome events need "
                        "their own topic")
    if ab.outcomes_group_id == kafka.group_id:
        problems.append(f"ab.outcomes_group_id: {ab.outcomes_group_id!r} is kafka.group_id too; give the outcome "
                        "consumer its own group")
    if problems:
        raise ConfigError(problems)


def build(settings: Settings, store: Any, telemetry: Telemetry) -> RoleParts:
    """The loop with its liveness (polled recently) and readiness (writes succeed). Raises ``RagmonError`` when
    the broker cannot be reached."""
    check(settings)
    loop, _, close = open_outcome_loop(settings, store, telemetry=telemetry)
    max_age = settings.process.ingest_liveness_limit(settings.store.query_timeout_seconds)

    def writing() -> tuple[bool, str]:
        if loop.paused:
            return False, f"outcome writes failing, consumption paused: {loop.stats.last_error}"
        return True, "outcome writes succeed"

    return RoleParts(loops=(_Closing(loop, close),), service=loop, readiness=writing,
                     liveness=heartbeat_check(lambda: loop.last_poll, max_age, "last outcome poll"),
                     on_stuck="uncommitted outcome events will be re-read on the next start (nothing is lost)")


class _Closing:
    """The loop as a daemon role: runs it, then closes its consumer and dead-letter producer."""

    name = "outcomes"

    def __init__(self, loop: Any, close: Any):
        self.loop, self.close = loop, close

    def run(self, stop: Any) -> None:
        self.loop.run(stop)  # a crash propagates with the consumer open: the daemon restarts this same loop
        self.close()
