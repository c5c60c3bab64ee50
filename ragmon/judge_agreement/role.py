"""The judge agreement role as a process starts it: the weekly judge-vs-human agreement, recomputed every
``drift.judge_agreement.interval_seconds``.

``check(settings)`` and ``build(settings, store, telemetry) -> RoleParts`` have the shape every role package's
``role.py`` has; ``ragmon.process`` calls them for ``ragmon run`` and ``ragmon drift`` (where this role ran inside
the drift role before it was one of its own: ``roles.judge_agreement`` unset follows ``roles.drift``). The job is
``job.JudgeAgreementJob``; a failing run is logged by ``PeriodicRole`` and tried again next interval. Must not open
the store or bind a port.
"""

from __future__ import annotations

from typing import Any

from ragmon.config import Settings
from ragmon.daemon import PeriodicRole, RoleParts
from ragmon.errors import ConfigError
from ragmon.judge_agreement.job import JudgeAgreementJob
from ragmon.telemetry import Telemetry

#: the loop's name (``/healthz``: ``judge_agreement_loop``; logs: ``role judge-agreement``)
LOOP = "judge-agreement"


def check(settings: Settings) -> None:
    """Raise ``ConfigError`` when the role is asked for with ``drift.judge_agreement.enabled`` off."""
    if not settings.drift.judge_agreement.enabled:
        raise ConfigError(["drift.judge_agreement.enabled is false: nothing to track; set it to true, or switch "
                           "the role off (RAGMON_ROLES__JUDGE_AGREEMENT=false)"])


def build(settings: Settings, store: Any, telemetry: Telemetry) -> RoleParts:
    """The agreement recomputed and published every ``drift.judge_agreement.interval_seconds``."""
    check(settings)
    agreement = settings.drift.judge_agreement
    job = JudgeAgreementJob(store, agreement, telemetry)
    return RoleParts(loops=(PeriodicRole(LOOP, agreement.interval_seconds, job.run_once),), service=job)
