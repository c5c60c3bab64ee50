"""The periodic coverage check the drift role runs when ``coverage.golden_path`` is set.

Owns building the ``PeriodicRole`` that reads the golden set (again each time, so a refreshed file is picked
up), compares it with the last ``coverage.window_days`` of classified traffic and sets the gauges. A failing
check is logged by ``PeriodicRole`` and retried next interval. Must not open the store or bind a port.
"""

from __future__ import annotations

import logging
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from ragmon.config import CoverageSettings
from ragmon.coverage.check import check_coverage, export
from ragmon.coverage.stats import CoverageThresholds
from ragmon.daemon import PeriodicRole
from ragmon.golden_files import load_golden
from ragmon.telemetry import Telemetry

log = logging.getLogger("ragmon.coverage")


def run_check(settings: CoverageSettings, store: Any, telemetry: Telemetry) -> Any:
    """One check now: compare, export, log the diverged strata with their under-represented types."""
    assert settings.golden_path is not None
    cases = load_golden(settings.golden_path).cases
    result = check_coverage(
        store, cases, settings.question_types, until=datetime.now(UTC), window=timedelta(days=settings.window_days),
        thresholds=CoverageThresholds.of(settings))
    export(result, telemetry, time.time())
    for s in result.diverged:
        log.warning("golden set no longer describes stratum %s (%s): under-represented %s", s.stratum,
                    s.status if s.status != "diverged" else f"TVD {s.distance:.2f}",
                    ", ".join(s.under_represented) or "-")
    return result


def coverage_role(settings: CoverageSettings, store: Any, telemetry: Telemetry) -> PeriodicRole:
    return PeriodicRole("coverage", settings.interval_seconds, lambda: run_check(settings, store, telemetry))
