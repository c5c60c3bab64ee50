"""Assembling one ragmon process from settings: which roles run, on one store, one telemetry, one HTTP port.

``build_process`` is what ``ragmon run`` calls. Every enabled role is built eagerly so that a bad setup (an
unreachable broker, a review UI without users, a judge without a key) fails at start-up with one line per
problem, never later inside a loop. The same image runs as separate Deployments by switching roles on and
off (``RAGMON_ROLES__<ROLE>``); the shadow role runs when it is on and comparisons are configured.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from fastapi import APIRouter

from ragmon.config import Settings
from ragmon.daemon import Daemon, PeriodicRole, Role
from ragmon.errors import ConfigError, RagmonError
from ragmon.server import Health
from ragmon.store import ClickHouseStore
from ragmon.telemetry import Telemetry

log = logging.getLogger("ragmon.run")
NO_ROLE = "roles: every role is switched off; enable at least one (RAGMON_ROLES__<ROLE>=true)"


@dataclass
class Process:
    """Everything one ragmon process runs."""

    settings: Settings
    store: ClickHouseStore
    telemetry: Telemetry
    health: Health
    roles: list[Role] = field(default_factory=list)
    routers: list[APIRouter] = field(default_factory=list)
    closers: list[Any] = field(default_factory=list)

    @property
    def role_names(self) -> list[str]:
        return [r.name for r in self.roles]

    def daemon(self) -> Daemon:
        daemon = Daemon(self.roles, grace_seconds=self.settings.ingest.shutdown_grace_seconds)
        self.health.add_liveness("roles", daemon.liveness_check)
        return daemon


def build_process(settings: Settings, *, store: ClickHouseStore | None = None,
                  telemetry: Telemetry | None = None) -> Process:
    """Build every enabled role. Raises ``ConfigError`` listing every role that cannot start, and why."""
    store = store or ClickHouseStore.open(settings.store)
    telemetry = telemetry or Telemetry()
    process = Process(settings, store, telemetry, Health())
    process.health.add_readiness("store", store.readiness)
    enabled = settings.roles
    problems: list[str] = []
    for name, wanted, build in (
        ("ingest", enabled.ingest, _ingest),
        ("score", enabled.score, _score),
        ("drift", enabled.drift, _drift),
        ("review", enabled.review, _review),
    ):
        if not wanted:
            continue
        try:
            build(process)
        except ConfigError as exc:
            problems.extend(f"{name}: {p}" for p in exc.problems)
        except RagmonError as exc:
            problems.append(f"{name}: {exc} (or switch the role off: RAGMON_ROLES__{name.upper()}=false)")
    if "shadow" in enabled_roles(settings):
        from ragmon.shadow.live import run_configured_comparisons

        process.roles.append(PeriodicRole(
            "shadow", settings.shadow.interval_seconds,
            lambda: run_configured_comparisons(store, settings, telemetry)))
    if problems:
        raise ConfigError(problems)
    if not process.roles:
        raise ConfigError([NO_ROLE])
    return process


def startup_problems(settings: Settings) -> list[str]:
    """What ``build_process`` would refuse, found without opening the store or connecting anywhere (``ragmon
    config check``): each enabled role's own checks of its settings, one line per problem."""
    import time

    from ragmon.drift.features import plan_features
    from ragmon.ingest.role import check_settings
    from ragmon.judge import make_judge
    from ragmon.review.auth import Authenticator

    roles = settings.roles
    checks: list[tuple[str, bool, Any]] = [
        ("score", roles.score, lambda: make_judge(settings.judge)),
        ("drift", roles.drift, lambda: plan_features(settings.drift)),
        ("review", roles.review, lambda: Authenticator(settings.review, time.time)),
    ]
    problems = [f"ingest: {p}" for p in check_settings(settings)] if roles.ingest else []
    for name, wanted, check in checks:
        if not wanted:
            continue
        try:
            check()
        except ConfigError as exc:
            problems.extend(p if p.startswith(f"{name}:") else f"{name}: {p}" for p in exc.problems)
        except RagmonError as exc:
            problems.append(f"{name}: {exc}")
    if not enabled_roles(settings):
        problems.append(NO_ROLE)
    return problems


def enabled_roles(settings: Settings) -> list[str]:
    """The roles a process with these settings runs: the switches in ``roles``, and shadow only when comparisons
    are configured too."""
    roles = settings.roles
    names = [name for name in ("ingest", "score", "drift", "review") if getattr(roles, name)]
    return names + (["shadow"] if roles.shadow and settings.shadow.comparisons else [])


def _ingest(p: Process) -> None:
    from ragmon.ingest.role import build_ingest

    p.roles.append(build_ingest(p.settings, p.store, p.telemetry, p.health))


def _score(p: Process) -> None:
    from ragmon.score.runner import ScoreRole
    from ragmon.server import heartbeat_check

    role = ScoreRole(p.settings, p.store, p.telemetry)
    p.health.add_liveness("score_loop", heartbeat_check(lambda: role.last_poll, 120.0, "last score poll"))
    p.roles.append(role)


def _drift(p: Process) -> None:
    from ragmon.drift.check import DriftChecker
    from ragmon.drift.schedule import DriftRole

    role = DriftRole(DriftChecker(p.store, p.settings.drift, p.telemetry), p.settings.drift.interval_seconds)
    p.health.add_liveness("drift_schedule", role.liveness)
    p.roles.append(role)


def _review(p: Process) -> None:
    from ragmon.review.role import ReviewRole

    role = ReviewRole(p.settings.review, p.store, p.telemetry)
    p.routers.append(role.router)
    p.roles.extend(role.roles())

