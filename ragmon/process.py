"""One way to start a ragmon process: roles built from settings, on one store, one telemetry, one HTTP port, run
until SIGTERM/SIGINT and stopped within ``process.shutdown_grace_seconds``.

Every daemon command (``ragmon ingest``, ``score``, ``drift``, ``review``, ``demo --keep-serving``) and ``ragmon
run`` go through here, the way arroyo runs every consumer through one ``StreamProcessor``: ``build_process``
opens the store (or takes one), builds each role through its package's ``<role>/role.py: build`` and registers
its health checks under one rule (liveness ``<role>_loop``: the role's threads are running and its own check
passes; readiness ``store``, plus ``<role>`` where a role has one); ``Process.serve`` binds the port and the roles' own
ports (a port in use is one ``ConfigError`` line); ``Process.run`` runs the daemon until a signal, stops the server and
records the roles still running after the grace period. ``serve_roles`` does all three. Every enabled role is built
eagerly, so a bad setup (an unreachable broker, a review UI without users, a judge without a key) fails at
start-up with one line per problem, never later inside a loop.

Must not print or exit: the commands print their own start-up line and turn ``still_running`` into exit 1.
"""

from __future__ import annotations

import dataclasses
import importlib
import logging
import socket
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from typing import Any, Protocol

from ragmon.config import Settings
from ragmon.daemon import Daemon, PeriodicRole, RoleParts
from ragmon.errors import ConfigError, RagmonError
from ragmon.server import Check, Health, ServerHandle, create_app, create_listener_app, serve
from ragmon.telemetry import Telemetry

#: every role a process can run, in start-up order: each is the package ``ragmon.<role>`` with ``role.py``
ROLES = ("ingest", "otlp", "outcomes", "score", "drift", "judge_agreement", "coverage", "review", "shadow")
#: roles that ran inside the drift role before they were roles of their own: unless switched off they run wherever
#: it does (an unset ``roles.<name>`` follows ``roles.drift``; ``ragmon drift`` starts them too)
WITH_DRIFT = ("judge_agreement", "coverage")
log = logging.getLogger("ragmon.process")

NO_ROLE = "roles: every role is switched off; enable at least one (RAGMON_ROLES__<ROLE>=true)"


class Ready(Protocol):
    """What the process needs of its store: a ``/readyz`` check that never raises."""

    def readiness(self) -> tuple[bool, str]: ...


class Process:
    """The built roles of one process, their health checks, the HTTP server and the daemon that runs them."""

    def __init__(self, settings: Settings, store: Ready, telemetry: Telemetry, parts: Mapping[str, RoleParts], *,
                 title: str = "ragmon", restart_pause_seconds: float = 5.0):
        self.settings, self.store, self.telemetry, self.title = settings, store, telemetry, title
        self.parts = dict(parts)
        self.daemon = Daemon([loop for p in self.parts.values() for loop in p.loops],
                             grace_seconds=settings.process.shutdown_grace_seconds,
                             restart_pause_seconds=restart_pause_seconds)
        self.health = Health()
        self.health.add_readiness("store", store.readiness)
        for name, p in self.parts.items():
            self.health.add_liveness(f"{name}_loop", self._liveness(p))
            if p.readiness is not None:
                self.health.add_readiness(name, p.readiness)
        self.server: ServerHandle | None = None
        #: the read API other ragmon processes' read commands use while this one holds the embedded store
        self.read_access: Any = None
        #: the roles' own ports (``RoleParts.listeners``), by listener name, while serving
        self.listeners: dict[str, ServerHandle] = {}
        #: the roles with a loop still running after the grace period (set by ``run``)
        self.still_running: list[str] = []

    @property
    def role_names(self) -> list[str]:
        return list(self.parts)

    @property
    def routers(self) -> list[Any]:
        return [r for p in self.parts.values() for r in p.routers]

    def service(self, role: str) -> Any:
        """The role's own object (``RoleParts.service``): the ingest pipeline, the score role, the review role."""
        return self.parts[role].service

    @property
    def port(self) -> int:
        if self.server is None:
            raise RuntimeError("the process is not serving; call serve() first")
        return self.server.port

    def _liveness(self, parts: RoleParts) -> Check:
        def check() -> tuple[bool, str]:
            alive = self.daemon.alive()  # a loop not started yet is not dead
            stopped = [loop.name for loop in parts.loops if alive.get(loop.name) is False]
            if stopped:
                return False, f"stopped: {', '.join(stopped)}"
            return parts.liveness() if parts.liveness is not None else (True, "running")

        return check

    def serve(self) -> int:
        """Bind ``server.host:server.port`` and serve /metrics, /healthz, /readyz and the roles' routers; return the
        port. Raises ``ConfigError`` (one line naming what to change) when the port cannot be bound."""
        from ragmon.store.read_api import read_access

        server = self.settings.server
        self.read_access = read_access(self.settings, self.store)
        extra = [self.read_access.router] if self.read_access is not None else []
        app = create_app(self.telemetry, self.health, [*self.routers, *extra], title=self.title)
        self.server = serve(app, server.host, server.port, forwarded_allow_ips=server.forwarded_allow_ips)
        try:
            if self.read_access is not None:
                self.read_access.publish(server.host, self.server.port)
            for role, listener in ((r, lr) for r, p in self.parts.items() for lr in p.listeners):
                try:
                    self.listeners[listener.name] = serve(
                        create_listener_app(listener.routers, title=self.title), listener.host, listener.port,
                        forwarded_allow_ips=server.forwarded_allow_ips, section=listener.name)
                except ConfigError as exc:  # the role's own port: it may be the one to switch off
                    raise ConfigError([f"{p} (or switch the role off: RAGMON_ROLES__{role.upper()}=false)"
                                       for p in exc.problems]) from None
        except BaseException:
            self.stop_server()
            raise
        return self.server.port

    def listener_port(self, name: str) -> int:
        """The port a role's own listener is bound to (``otlp``: the OTLP/HTTP receiver's)."""
        return self.listeners[name].port

    def stop(self) -> None:
        """Ask every loop to stop, as SIGTERM does (e.g. a batch job that is done)."""
        self.daemon.stop_event.set()

    def wait_for_stop(self, timeout: float) -> bool:
        """Block until the process is asked to stop (True) or ``timeout`` seconds have passed (False)."""
        return self.daemon.stop_event.wait(timeout)

    def run(self) -> list[str]:
        """Run every loop until SIGTERM/SIGINT, ``stop()`` or the end of every loop; stop them within the grace
        period, then the HTTP server. Returns (and keeps in ``still_running``) the roles still running. Must be
        called from the main thread."""
        try:
            loops = set(self.daemon.run_until_signal())
        finally:
            self.stop_server()
        self.still_running = [name for name, p in self.parts.items() if any(lp.name in loops for lp in p.loops)]
        return self.still_running

    def fatal_errors(self) -> dict[str, BaseException]:
        """The roles whose loop ended because it can never work as configured, with why (``Role``)."""
        return {name: loop.fatal_error for name, part in self.parts.items() for loop in part.loops
                if getattr(loop, "fatal_error", None) is not None}

    def stop_server(self) -> None:
        if self.read_access is not None:
            self.read_access.withdraw()
        for handle in self.listeners.values():
            handle.stop()
        self.listeners = {}
        if self.server is not None:
            self.server.stop()
            self.server = None

    def stuck_message(self) -> str:
        """One line: the roles still running after the grace period, and what that means for each."""
        grace = self.settings.process.shutdown_grace_seconds
        hints = [f"{name}: {self.parts[name].on_stuck}" for name in self.still_running if self.parts[name].on_stuck]
        return (f"still running {grace:g}s after the stop signal (process.shutdown_grace_seconds): "
                f"{', '.join(self.still_running)}" + "".join(f"; {h}" for h in hints))


def serve_roles(settings: Settings, only: Iterable[str] | None = None, *, store: Any = None,
                telemetry: Telemetry | None = None, options: Mapping[str, Mapping[str, Any]] | None = None,
                title: str = "ragmon", started: Callable[[Process], None] | None = None) -> Process:
    """Build the roles (``build_process``), serve the HTTP port, call ``started(process)`` (the command's start-up
    line), and run until a signal. Returns the stopped process; ``still_running`` names what did not stop."""
    process = build_process(settings, only, store=store, telemetry=telemetry, options=options, title=title)
    process.serve()
    try:
        if started is not None:
            started(process)
    except BaseException:
        process.stop_server()
        raise
    process.run()
    return process


def build_process(settings: Settings, only: Iterable[str] | None = None, *, store: Any = None,
                  telemetry: Telemetry | None = None, options: Mapping[str, Mapping[str, Any]] | None = None,
                  title: str = "ragmon") -> Process:
    """Open the store (unless given) and build the roles: ``only`` these, or every role the settings switch on.

    ``options`` are keyword arguments for a role's ``build`` (``{"score": {"max_traces": 10}}``). With ``only``
    (a command that names its role) a role that cannot start raises its own error. Otherwise every role is
    tried and one ``ConfigError`` lists every problem, each with the switch that turns the role off.
    """
    from ragmon.store import ClickHouseStore

    names = list(only) if only is not None else enabled_roles(settings)
    options = options or {}
    unknown = sorted((set(names) - set(ROLES)) | (set(options) - set(names)))
    if unknown:
        raise ValueError(f"roles {unknown} are not among the roles to build ({names}); expected some of {ROLES}")
    # fails fast: unreachable, locked, migration failed
    store = ClickHouseStore.open(settings.store) if store is None else store
    telemetry = telemetry or Telemetry()
    guard = getattr(store, "guard", None)  # the embedded engine's write guard: its disk and part metrics
    if guard is not None:
        guard.attach(telemetry)
    # where the alert rules' links point (their annotation templates read it), without credentials
    telemetry.process.links_info.info(settings.console.published_links(settings.server.host, settings.server.port,
                                                                       socket.gethostname()))
    parts: dict[str, RoleParts] = {}
    problems: list[str] = []
    for name in names:
        try:
            parts[name] = role_module(name).build(settings, store, telemetry, **options.get(name, {}))
        except RagmonError as exc:
            if only is not None:
                raise
            problems.extend(_problems(name, exc, f" (or switch the role off: RAGMON_ROLES__{name.upper()}=false)"))
    if problems:
        raise ConfigError(problems)
    if not parts:
        raise ConfigError([NO_ROLE])
    if "review" in parts:  # the console is served with the review UI, behind its sign-in
        parts["review"] = _with_console(settings, store, parts["review"])
    return Process(settings, store, telemetry, parts, title=title)


#: how often the console's warm-up loop looks for a new shadow check to compute (at most the check interval)
SHADOW_WARM_EVERY = 15.0


def _with_console(settings: Settings, store: Any, review: RoleParts) -> RoleParts:
    """The review role's parts plus the console's routes (``ragmon.console``), which share its sign-in, and the
    console's warm-up loop: the Shadow page's comparisons of each new shadow check computed before anyone asks."""
    from ragmon.console.router import console_router, redirect_router
    from ragmon.console.shadow_page import ComparisonCache

    comparisons = ComparisonCache()
    routers = (console_router(settings, store, review.service.context, comparisons=comparisons), redirect_router())

    def warm() -> None:
        try:
            comparisons.warm(store, settings, datetime.now(UTC))
        except RagmonError as exc:  # the page says it when asked; the loop tries again
            log.warning("console: the shadow comparisons were not computed ahead: %s", exc)

    loop = PeriodicRole("console-shadow-warm", min(SHADOW_WARM_EVERY, settings.shadow.interval_seconds), warm)
    return dataclasses.replace(review, routers=(*review.routers, *routers), loops=(*review.loops, loop))


def startup_problems(settings: Settings) -> list[str]:
    """What ``build_process`` would refuse, found without opening the store or connecting anywhere (``ragmon
    config check``): each enabled role's ``check`` of its settings, one line per problem."""
    names = enabled_roles(settings)
    problems = []
    for name in names:
        try:
            role_module(name).check(settings)
        except RagmonError as exc:
            problems.extend(_problems(name, exc))
    return problems if names else [NO_ROLE]


def _problems(role: str, exc: RagmonError, hint: str = "") -> list[str]:
    """One line per problem, each naming the role; ``hint`` follows a problem that is not the configuration's."""
    if isinstance(exc, ConfigError):
        return [p if p.startswith(f"{role}:") else f"{role}: {p}" for p in exc.problems]
    return [f"{role}: {exc}{hint}"]


def enabled_roles(settings: Settings) -> list[str]:
    """The roles a process with these settings runs: the switches in ``roles`` (``RolesSettings.switched_on``), and
    of the roles that have work to configure besides (``configured``) only those that have some."""
    return [name for name in ROLES if settings.roles.switched_on(name) and configured(settings, name)]


def drift_roles(settings: Settings) -> list[str]:
    """The roles ``ragmon drift`` runs: drift, and those of ``WITH_DRIFT`` that are configured and not switched
    off explicitly (``roles.<name>: false``), whatever ``roles.drift`` says (the command names the drift role)."""
    return ["drift", *(name for name in WITH_DRIFT
                       if getattr(settings.roles, name) is not False and configured(settings, name))]


def configured(settings: Settings, role: str) -> bool:
    """Whether a switched-on role has work: shadow needs comparisons (``shadow.comparisons``), coverage a golden
    set (``coverage.golden_path``), judge agreement ``drift.judge_agreement.enabled``; every other role always."""
    if role == "shadow":
        return bool(settings.shadow.comparisons)
    if role == "coverage":
        return settings.coverage.golden_path is not None
    if role == "judge_agreement":
        return settings.drift.judge_agreement.enabled
    return True


def role_module(name: str) -> Any:
    """``ragmon.<name>.role``: its ``check(settings)`` and ``build(settings, store, telemetry, **options)``.
    Imported on first use, so a process loads only the roles it runs."""
    return importlib.import_module(f"ragmon.{name}.role")
