"""The score role as a process starts it: the Kafka consume loop with the pinned judge, and its liveness.

``check(settings)`` and ``build(settings, store, telemetry, ...) -> RoleParts`` have the shape every role
package's ``role.py`` has; ``ragmon.process`` calls them for ``ragmon score`` (Kafka mode) and ``ragmon run``.
The loop itself is ``runner.ScoreRole``. Must not open the store or bind a port; the backfill
(``ragmon score --from-store``) is not a daemon and does not start here.
"""

from __future__ import annotations

from ragmon.config import Settings
from ragmon.daemon import RoleParts
from ragmon.judge import make_judge
from ragmon.score.queries import ScoreStore
from ragmon.score.runner import ScoreRole
from ragmon.server import heartbeat_check
from ragmon.telemetry import Telemetry


def check(settings: Settings) -> None:
    """Raise ``ConfigError`` when the pinned judge cannot be made from the settings (no connection is made)."""
    make_judge(settings.judge)


def build(settings: Settings, store: ScoreStore, telemetry: Telemetry, *, max_traces: int | None = None
          ) -> RoleParts:
    """The consume loop (its consumer created now, so an unreachable broker fails at start-up) and its liveness:
    the loop polled within ``process.score_liveness_seconds``. ``max_traces`` ends the loop early (batch jobs,
    tests); ``--exit-when-idle`` stops the process from outside (``ragmon.cli.idle_watch``). Readiness: the loop's
    writes succeed (while one fails as retryable, its batch waits for another try and fetching pauses)."""
    role = ScoreRole(settings, store, telemetry, max_traces=max_traces)
    liveness = heartbeat_check(lambda: role.last_poll, settings.process.score_liveness_seconds, "last score poll")

    def writing() -> tuple[bool, str]:
        error = role.consumer_state.write_error
        if error is not None:
            return False, f"writes failing, fetching paused (the batch is written again after a backoff): {error}"
        return True, "writes succeed"

    return RoleParts(loops=(role,), service=role, liveness=liveness, readiness=writing,
                     on_stuck="uncommitted traces are re-scored on the next start")
