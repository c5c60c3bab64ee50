"""The drift role as a process starts it: checks on a schedule, and the liveness of that schedule.

``check(settings)`` and ``build(settings, store, telemetry) -> RoleParts`` have the shape every role package's
``role.py`` has; ``ragmon.process`` calls them for ``ragmon drift`` and ``ragmon run``. The schedule itself is
``schedule.DriftRole``, the check ``check.DriftChecker``. Judge agreement and the golden-set coverage check, which
ran inside this role before, are roles of their own (``ragmon.judge_agreement``, ``ragmon.coverage``) that run
wherever this one does unless switched off. Must not open the store or bind a port.
"""

from __future__ import annotations

from typing import Any

from ragmon.config import Settings
from ragmon.daemon import RoleParts
from ragmon.drift.check.check import DriftChecker
from ragmon.drift.check.schedule import DriftRole
from ragmon.drift.explain.explain_hint import publish_hints
from ragmon.drift.method.features import plan_features
from ragmon.telemetry import Telemetry


def check(settings: Settings) -> None:
    """Raise ``ConfigError`` when ``drift.features`` or ``drift.overrides`` name what does not exist."""
    plan_features(settings.drift)


def build(settings: Settings, store: Any, telemetry: Telemetry) -> RoleParts:
    """A check every ``drift.interval_seconds``; alive while the last attempt is recent (``DriftRole.liveness``)."""
    watch = settings.drift.watch
    role = DriftRole(DriftChecker(store, settings.drift, telemetry), settings.drift.interval_seconds,
                     look_seconds=watch.interval_seconds if watch.enabled else None,
                     on_result=lambda result: publish_hints(store, settings.drift, telemetry, result))
    return RoleParts(loops=(role,), service=role, liveness=role.liveness)
