"""The one HTTP port of a ragmon process: ``/metrics``, ``/healthz``, ``/readyz`` and any role's routers.

Roles register what they serve: health checks (``Health.add_liveness`` / ``add_readiness``) and FastAPI
routers (the review UI). ``serve`` runs uvicorn in a background thread so the role loops keep the main
thread. Liveness says a loop is alive (e.g. the consume loop polled recently); readiness says its
dependencies answer (e.g. the store). Neither check may block for long: they run on every probe.

Probes are unauthenticated (kubelet, load balancers), so ``/readyz`` answers with each failing check's reason only
(``store unreachable``), never its cause (the engine's or client's error text, which can name hosts, users, paths
and SQL); the cause is logged when a check starts failing or fails differently. The API's schema is not served
here (``openapi_url=None``): a role that has an API serves it behind its own sign-in (the review role does).
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import uvicorn
from fastapi import APIRouter, FastAPI, Request, Response
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from ragmon.errors import ConfigError
from ragmon.telemetry import Telemetry

#: a check returns (ok, detail); the detail is ``<reason>`` or ``<reason>: <cause>``: the reason is fixed text a
#: stranger may read, the cause may carry an error's text (answered to no one, logged)
Check = Callable[[], tuple[bool, str]]

log = logging.getLogger(__name__)


def reason_of(detail: str) -> str:
    """The part of a check's detail an unauthenticated caller sees: the reason before the first ``": "``."""
    return detail.split(": ", 1)[0]


@dataclass
class Health:
    """Named liveness and readiness checks, evaluated on each probe."""

    liveness: dict[str, Check] = field(default_factory=dict)
    readiness: dict[str, Check] = field(default_factory=dict)

    def add_liveness(self, name: str, check: Check) -> None:
        self.liveness[name] = check

    def add_readiness(self, name: str, check: Check) -> None:
        self.readiness[name] = check

    @staticmethod
    def evaluate(checks: dict[str, Check]) -> tuple[bool, dict[str, dict[str, object]]]:
        results: dict[str, dict[str, object]] = {}
        ok_all = True
        for name, check in checks.items():
            try:
                ok, detail = check()
            except Exception as exc:  # noqa: BLE001 - a failing check is a failed probe, not a crash
                ok, detail = False, f"check raised {type(exc).__name__}: {exc}"
            results[name] = {"ok": ok, "detail": detail}
            ok_all = ok_all and ok
        return ok_all, results


def heartbeat_check(last_beat: Callable[[], float], max_age_seconds: float, what: str) -> Check:
    """Liveness check: ``last_beat()`` (a monotonic time) is at most ``max_age_seconds`` old."""

    def check() -> tuple[bool, str]:
        age = time.monotonic() - last_beat()
        return age <= max_age_seconds, f"{what} {age:.1f}s ago (limit {max_age_seconds:.0f}s)"

    return check


async def _invalid_request(request: Request, exc: Exception) -> JSONResponse:
    """422 with where and why each field is wrong, without echoing the input: a client that sent 100 KB where 2,000
    characters are allowed gets the problem back, not its 100 KB (FastAPI's default repeats every input)."""
    assert isinstance(exc, RequestValidationError)
    errors = [{k: v for k, v in e.items() if k not in ("input", "url")} for e in exc.errors()]
    return JSONResponse({"detail": jsonable_encoder(errors)}, status_code=422)


def create_app(telemetry: Telemetry, health: Health, routers: Iterable[APIRouter] = (), *,
               title: str = "ragmon") -> FastAPI:
    app = FastAPI(title=title, docs_url=None, redoc_url=None, openapi_url=None)
    app.add_exception_handler(RequestValidationError, _invalid_request)

    @app.get("/metrics", include_in_schema=False)
    def metrics() -> Response:
        return Response(generate_latest(telemetry.registry), media_type=CONTENT_TYPE_LATEST)

    @app.get("/healthz", include_in_schema=False)
    def healthz() -> JSONResponse:
        ok, results = Health.evaluate(health.liveness)
        return JSONResponse({"ok": ok, "checks": results}, status_code=200 if ok else 503)

    failing = _FailingChecks()

    @app.get("/readyz", include_in_schema=False)
    def readyz() -> JSONResponse:
        ok, results = Health.evaluate(health.readiness)
        failing.log_changes(results)
        public = {name: {"ok": r["ok"], "detail": reason_of(str(r["detail"]))} for name, r in results.items()}
        return JSONResponse({"ok": ok, "checks": public}, status_code=200 if ok else 503)

    for router in routers:
        app.include_router(router)
    return app


class _FailingChecks:
    """The readiness checks failing at the last probe, so that each failure's full text is logged once when it
    starts (or its text changes) and its recovery once, not on every probe. Thread-safe (probes run in a pool)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._details: dict[str, str] = {}

    def log_changes(self, results: dict[str, dict[str, object]]) -> None:
        with self._lock:
            for name, result in results.items():
                detail, before = str(result["detail"]), self._details.get(name)
                if not result["ok"] and detail != before:
                    log.warning("readiness check %s failing: %s", name, detail)
                    self._details[name] = detail
                elif result["ok"] and before is not None:
                    log.info("readiness check %s passes again: %s", name, detail)
                    del self._details[name]


def create_listener_app(routers: Iterable[APIRouter], *, title: str = "ragmon") -> FastAPI:
    """An app serving only ``routers``: a role's own port (no metrics or health there; those are on the shared one)."""
    app = FastAPI(title=title, docs_url=None, redoc_url=None, openapi_url=None)
    for router in routers:
        app.include_router(router)
    return app


class ServerHandle:
    """A uvicorn server running in a daemon thread."""

    def __init__(self, server: uvicorn.Server, thread: threading.Thread):
        self._server = server
        self._thread = thread

    @property
    def port(self) -> int:
        for s in self._server.servers:
            for sock in s.sockets:
                return int(sock.getsockname()[1])
        raise RuntimeError("server is not listening")

    def stop(self, timeout: float = 5.0) -> None:
        self._server.should_exit = True
        self._thread.join(timeout)


def serve(app: FastAPI, host: str, port: int, *, startup_timeout: float = 10.0,
          forwarded_allow_ips: str = "", section: str = "server") -> ServerHandle:
    """Start ``app`` on ``host:port`` (0 = any free port) in a background thread; return once listening.
    ``forwarded_allow_ips``: proxies whose X-Forwarded-For header gives the client address (server settings);
    empty: none (the header is ignored).
    ``section``: the settings section whose ``host`` and ``port`` these are, named when they cannot be bound."""
    # no trusted proxy: X-Forwarded-For is ignored, so a client cannot choose the address it is counted under
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", access_log=False, lifespan="off",
                            proxy_headers=bool(forwarded_allow_ips), forwarded_allow_ips=forwarded_allow_ips or None)
    server = uvicorn.Server(config)
    server.install_signal_handlers = lambda: None  # type: ignore[method-assign] - the main loop owns signals
    # here, not in uvicorn's thread, so a port in use is one clear error, not a traceback
    sock = _bind(host, port, section)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name="ragmon-http", daemon=True)
    thread.start()
    deadline = time.monotonic() + startup_timeout
    while not server.started:
        if not thread.is_alive():
            raise OSError(f"the HTTP server could not start on {host}:{port} (is the port in use?)")
        if time.monotonic() > deadline:
            raise OSError(f"the HTTP server did not start on {host}:{port} within {startup_timeout:.0f}s")
        time.sleep(0.01)
    return ServerHandle(server, thread)


def _bind(host: str, port: int, section: str = "server") -> socket.socket:
    """A socket bound to ``host:port``; ``ConfigError`` saying what to change when that is impossible."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except (socket.gaierror, UnicodeError) as exc:
        raise ConfigError([f"{section}.host: cannot resolve {host!r} ({exc}); use an address such as 127.0.0.1 or "
                           "0.0.0.0"]) from None
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
    except OSError as exc:
        sock.close()
        how = "--port or RAGMON_SERVER__PORT" if section == "server" else f"RAGMON_{section.upper()}__PORT"
        raise ConfigError([f"{section}: cannot listen on {host}:{port} ({exc.strerror or exc}); choose another port "
                           f"({how}; 0 picks a free one) or address ({section}.host)"]) from None
    return sock
