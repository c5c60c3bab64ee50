"""The shadow role as a process starts it: the configured comparisons (``shadow.comparisons``) recomputed every
``shadow.interval_seconds`` and exported as gauges.

``check(settings)`` and ``build(settings, store, telemetry) -> RoleParts`` have the shape every role package's
``role.py`` has; ``ragmon.process`` calls them for ``ragmon run`` when the role is on and comparisons are
configured. The comparison itself is ``live.run_configured_comparisons``. Must not open the store or bind a port.
"""

from __future__ import annotations

from typing import Any

from ragmon.config import Settings
from ragmon.daemon import PeriodicRole, RoleParts
from ragmon.shadow.live import run_configured_comparisons
from ragmon.shadow.metrics import ShadowMetrics
from ragmon.telemetry import Telemetry


def check(settings: Settings) -> None:
    """Nothing beyond the settings models, which validate every comparison when the section loads."""


def build(settings: Settings, store: Any, telemetry: Telemetry) -> RoleParts:
    """One periodic loop; a failing comparison is logged and counted inside it, never fatal. Registers the shadow
    metrics."""
    metrics = telemetry.use(ShadowMetrics)
    loop = PeriodicRole("shadow", settings.shadow.interval_seconds,
                        lambda: run_configured_comparisons(store, settings, metrics))
    return RoleParts(loops=(loop,), service=loop)
