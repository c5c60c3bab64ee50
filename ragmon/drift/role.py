"""The drift role as a process starts it: checks on a schedule, and the liveness of that schedule.

``check(settings)`` and ``build(settings, store, telemetry) -> RoleParts`` have the shape every role package's
``role.py`` has; ``ragmon.process`` calls them for ``ragmon drift`` and ``ragmon run``. The schedule itself is
``schedule.DriftRole``, the check ``check.DriftChecker``; judge drift (``judge_agreement.JudgeAgreementJob``, weekly
judge-vs-human kappa from review labels) runs beside it as its own periodic loop, and with ``coverage.golden_path``
set so does the golden-set coverage check (``ragmon.coverage.role``). Must not open the store or bind a port.
"""

from __future__ import annotations

from typing import Any

from ragmon.config import Settings
from ragmon.coverage.role import coverage_role
from ragmon.daemon import PeriodicRole, RoleParts
from ragmon.drift.check import DriftChecker
from ragmon.drift.explain_hint import publish_hints
from ragmon.drift.features import plan_features
from ragmon.drift.judge_agreement import JudgeAgreementJob
from ragmon.drift.schedule import DriftRole
from ragmon.errors import ConfigError, InputError
from ragmon.golden_files import load_golden
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
    """A check every ``drift.interval_seconds``; alive while the last attempt is recent (``DriftRole.liveness``).
    With ``drift.judge_agreement.enabled``, the weekly judge agreement every ``judge_agreement.interval_seconds``."""
    watch = settings.drift.watch
    role = DriftRole(DriftChecker(store, settings.drift, telemetry), settings.drift.interval_seconds,
                     look_seconds=watch.interval_seconds if watch.enabled else None,
                     on_result=lambda result: publish_hints(store, settings.drift, telemetry, result))
    agreement = settings.drift.judge_agreement
    loops: tuple[Any, ...] = (role,)
    if agreement.enabled:
        job = JudgeAgreementJob(store, agreement, telemetry)
        loops += (PeriodicRole("judge-agreement", agreement.interval_seconds, job.run_once),)
    if settings.coverage.golden_path is not None:  # the golden set's coverage of live question types
        loops += (coverage_role(settings.coverage, store, telemetry),)
    return RoleParts(loops=loops, service=role, liveness=role.liveness)
