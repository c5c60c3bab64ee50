"""The coverage role as a process starts it: the golden set's question types against live traffic's, every
``coverage.interval_seconds``.

``check(settings)`` and ``build(settings, store, telemetry) -> RoleParts`` have the shape every role package's
``role.py`` has; ``ragmon.process`` calls them for ``ragmon run`` and ``ragmon drift`` (where this check ran inside
the drift role before it was a role of its own: ``roles.coverage`` unset follows ``roles.drift``). Each run reads
the golden set again (a refreshed file is picked up), compares it with the last ``coverage.window_days`` of
classified traffic and sets the gauges; a failing run is logged by ``PeriodicRole`` and tried again next interval.
Must not open the store or bind a port.
"""

from __future__ import annotations

import logging
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from ragmon.config import CoverageSettings, Settings
from ragmon.coverage.check import check_coverage, export
from ragmon.coverage.metrics import CoverageMetrics
from ragmon.coverage.stats import CoverageThresholds
from ragmon.daemon import PeriodicRole, RoleParts
from ragmon.errors import ConfigError, InputError
from ragmon.golden_files import load_golden
from ragmon.telemetry import Telemetry

log = logging.getLogger("ragmon.coverage")


def run_check(settings: CoverageSettings, store: Any, metrics: CoverageMetrics) -> Any:
    """One check now: compare, export, log the diverged strata with their under-represented types."""
    assert settings.golden_path is not None
    cases = load_golden(settings.golden_path).cases
    result = check_coverage(
        store, cases, settings.question_types, until=datetime.now(UTC), window=timedelta(days=settings.window_days),
        thresholds=CoverageThresholds.of(settings))
    export(result, metrics, time.time())
    for s in result.diverged:
        log.warning("golden set no longer describes stratum %s (%s): under-represented %s", s.stratum,
                    s.status if s.status != "diverged" else f"TVD {s.distance:.2f}",
                    ", ".join(s.under_represented) or "-")
    return result


def check(settings: Settings) -> None:
    """Raise ``ConfigError`` when ``coverage.golden_path`` is unset or not a valid golden set."""
    path = settings.coverage.golden_path
    if path is None:
        raise ConfigError(["coverage.golden_path is not set: no golden set to compare traffic with; set it, or "
                           "switch the role off (RAGMON_ROLES__COVERAGE=false)"])
    try:
        load_golden(path)
    except InputError as exc:
        raise ConfigError([f"coverage.golden_path: {exc}"]) from None


def build(settings: Settings, store: Any, telemetry: Telemetry) -> RoleParts:
    """The check every ``coverage.interval_seconds`` (the first at start-up); registers the coverage gauges."""
    check(settings)
    cov = settings.coverage
    metrics = telemetry.use(CoverageMetrics)
    return RoleParts(loops=(PeriodicRole("coverage", cov.interval_seconds, lambda: run_check(cov, store, metrics)),))
