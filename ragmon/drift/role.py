"""The drift role as a process starts it: checks on a schedule, and the liveness of that schedule.

``check(settings)`` and ``build(settings, store, telemetry) -> RoleParts`` have the shape every role package's
``role.py`` has; ``ragmon.process`` calls them for ``ragmon drift`` and ``ragmon run``. The schedule itself is
``schedule.DriftRole``, the check ``check.DriftChecker``; with ``coverage.golden_path`` set it also runs the
golden-set coverage check (``ragmon.coverage.role``). Must not open the store or bind a port.
"""

from __future__ import annotations

from typing import Any

from ragmon.config import Settings
from ragmon.coverage.role import coverage_role
from ragmon.daemon import RoleParts
from ragmon.drift.check import DriftChecker
from ragmon.drift.features import plan_features
from ragmon.drift.schedule import DriftRole
from ragmon.errors import ConfigError, InputError
from ragmon.gate.golden_io import load_golden
from ragmon.telemetry import Telemetry


def check(settings: Settings) -> None:
    """Raise ``ConfigError`` when ``drift.features`` or ``drift.overrides`` name what does not exist, or
    ``coverage.golden_path`` is not a valid golden set."""
    plan_features(settings.drift)
    if settings.coverage.golden_path is not None:
        try:
            load_golden(settings.coverage.golden_path)
        except InputError as exc:
            raise ConfigError([f"coverage.golden_path: {exc}"]) from None


def build(settings: Settings, store: Any, telemetry: Telemetry) -> RoleParts:
    """A check every ``drift.interval_seconds``; alive while the last attempt is recent (``DriftRole.liveness``)."""
    role = DriftRole(DriftChecker(store, settings.drift, telemetry), settings.drift.interval_seconds)
    loops: tuple[Any, ...] = (role,)
    if settings.coverage.golden_path is not None:  # the golden set's coverage of live question types, same cadence role
        loops = (role, coverage_role(settings.coverage, store, telemetry))
    return RoleParts(loops=loops, service=role, liveness=role.liveness)
