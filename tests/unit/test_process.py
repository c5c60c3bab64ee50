"""The one process assembler every daemon command goes through (``ragmon.process``): shutdown on a real SIGTERM
within ``process.shutdown_grace_seconds``, a role that does not stop reported with exit 1, a crashed role
restarted, liveness per role under one name (``<role>_loop``), readiness of the store, and a port in use as one
line. The roles here are scripted loops and the store a stand-in with a switchable readiness: the assembler
needs nothing more of them. The real roles' own checks are in tests/integration/test_process.py."""

from __future__ import annotations

import os
import signal
import socket
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
import typer

from ragmon.cli.common import exit_if_stuck
from ragmon.config import Settings
from ragmon.contracts.golden import GoldenCase
from ragmon.daemon import RoleParts
from ragmon.errors import ConfigError
from ragmon.golden_files import write_golden
from ragmon.process import Process, build_process, drift_roles, enabled_roles, startup_problems
from ragmon.telemetry import Telemetry


class Loop:
    """A scripted daemon loop: waits for the stop event (or, ``ignore_stop``, for ``release``), and raises on
    its first run when ``crash_first``."""

    def __init__(self, name: str, *, crash_first: bool = False, ignore_stop: bool = False):
        self.name, self.crash_first, self.ignore_stop = name, crash_first, ignore_stop
        self.runs = 0
        self.running, self.stopped, self.release = threading.Event(), threading.Event(), threading.Event()

    def run(self, stop: threading.Event) -> None:
        self.runs += 1
        if self.crash_first and self.runs == 1:
            raise RuntimeError("scripted crash")
        self.running.set()
        (self.release if self.ignore_stop else stop).wait()
        self.stopped.set()


class Store:
    """The one thing a process asks of its store: readiness."""

    def __init__(self) -> None:
        self.answer = (True, "store answers")

    def readiness(self) -> tuple[bool, str]:
        return self.answer


@pytest.fixture(autouse=True)
def _no_process_tuning(monkeypatch: pytest.MonkeyPatch) -> None:
    # the daemon freezes the collector and tunes malloc for a long-running process; not for the test runner's
    monkeypatch.setattr("ragmon.daemon.tune_gc", lambda: None)
    monkeypatch.setattr("ragmon.daemon.tune_malloc", lambda: False)


def make_process(parts: dict[str, RoleParts], *, grace: float = 20.0, store: Store | None = None) -> Process:
    settings = Settings(process={"shutdown_grace_seconds": grace}, server={"port": 0})
    return Process(settings, store or Store(), Telemetry(), parts, title="test", restart_pause_seconds=0.01)


def sigterm_when(*ready: threading.Event, then: Callable[[], None] = lambda: None) -> threading.Thread:
    """A thread that waits for ``ready``, calls ``then`` and sends this process a real SIGTERM."""

    def drive() -> None:
        for event in ready:
            assert event.wait(30), "a loop never started"
        try:
            then()
        finally:
            os.kill(os.getpid(), signal.SIGTERM)

    thread = threading.Thread(target=drive, name="test-sigterm", daemon=True)
    thread.start()
    return thread


def get(process_port: int, path: str) -> httpx.Response:
    return httpx.get(f"http://127.0.0.1:{process_port}{path}", timeout=10)


@pytest.fixture
def previous_handler() -> Iterator[object]:
    before = signal.getsignal(signal.SIGTERM)
    yield before
    signal.signal(signal.SIGTERM, before)


def test_sigterm_stops_every_role_and_the_server_and_restores_the_signal_handler(previous_handler: object):
    a1, a2, b = Loop("alpha-1"), Loop("alpha-2"), Loop("beta")
    process = make_process({"alpha": RoleParts(loops=(a1, a2)), "beta": RoleParts(loops=(b,))})
    port = process.serve()
    sigterm_when(a1.running, a2.running, b.running)
    assert process.run() == [] and process.still_running == []
    assert all(loop.stopped.is_set() for loop in (a1, a2, b))
    with pytest.raises(httpx.ConnectError):
        get(port, "/healthz")
    assert signal.getsignal(signal.SIGTERM) is previous_handler


def test_a_role_that_does_not_stop_is_reported_by_name_and_exits_1(previous_handler: object,
                                                                    capsys: pytest.CaptureFixture[str]):
    stuck, fine = Loop("stuck", ignore_stop=True), Loop("fine")
    process = make_process({"stuck": RoleParts(loops=(stuck,), on_stuck="its batch is re-read on the next start"),
                            "fine": RoleParts(loops=(fine,))}, grace=0.2)
    sigterm_when(stuck.running, fine.running)
    try:
        assert process.run() == ["stuck"]
        assert fine.stopped.is_set() and not stuck.stopped.is_set()
        with pytest.raises(typer.Exit) as exited:
            exit_if_stuck(process)
    finally:
        stuck.release.set()
    assert exited.value.exit_code == 1
    [line] = capsys.readouterr().err.strip().splitlines()
    assert line == ("error: still running 0.2s after the stop signal (process.shutdown_grace_seconds): stuck; "
                    "stuck: its batch is re-read on the next start")


def test_a_crashed_role_is_restarted_and_stays_live_meanwhile(previous_handler: object):
    crashing = Loop("crashing", crash_first=True)
    process = make_process({"alpha": RoleParts(loops=(crashing,))})
    port = process.serve()
    seen: list[httpx.Response] = []
    sigterm_when(crashing.running, then=lambda: seen.append(get(port, "/healthz")))
    assert process.run() == []
    assert crashing.runs == 2 and crashing.stopped.is_set()
    [health] = seen
    assert health.status_code == 200 and health.json()["checks"]["alpha_loop"]["ok"] is True


def test_liveness_is_one_check_per_role_named_role_loop(previous_handler: object):
    beating = {"ok": True}
    a, b = Loop("alpha"), Loop("beta-main")
    process = make_process({
        "alpha": RoleParts(loops=(a,), liveness=lambda: (beating["ok"], "last beat 3s ago")),
        "beta": RoleParts(loops=(b,)),
    })
    assert set(process.health.liveness) == {"alpha_loop", "beta_loop"}
    port = process.serve()
    seen: list[httpx.Response] = []

    def probe() -> None:
        seen.append(get(port, "/healthz"))
        beating["ok"] = False
        seen.append(get(port, "/healthz"))

    sigterm_when(a.running, b.running, then=probe)
    process.run()
    healthy, stalled = seen
    assert healthy.status_code == 200, healthy.text
    assert stalled.status_code == 503
    assert stalled.json()["checks"] == {"alpha_loop": {"ok": False, "detail": "last beat 3s ago"},
                                        "beta_loop": {"ok": True, "detail": "running"}}
    ok, results = process.health.evaluate(process.health.liveness)  # after the stop: every loop has ended
    assert not ok and results["beta_loop"] == {"ok": False, "detail": "stopped: beta-main"}


def test_readiness_is_the_store_and_each_role_own_check():
    store = Store()
    writing = {"answer": (True, "writes succeed")}
    process = make_process({"alpha": RoleParts(loops=(Loop("alpha"),), readiness=lambda: writing["answer"]),
                            "beta": RoleParts(loops=(Loop("beta"),))}, store=store)
    port = process.serve()
    try:
        ready = get(port, "/readyz")
        assert ready.status_code == 200 and set(ready.json()["checks"]) == {"store", "alpha"}
        store.answer = (False, "store unreachable: connection refused")
        down = get(port, "/readyz")
        assert down.status_code == 503
        assert down.json()["checks"]["store"] == {"ok": False, "detail": "store unreachable"}  # the cause: logged
        store.answer, writing["answer"] = (True, "store answers"), (False, "writes failing, consumption paused")
        assert get(port, "/readyz").json()["checks"]["alpha"]["ok"] is False
    finally:
        process.stop_server()


def test_a_port_in_use_is_one_config_error_line():
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        settings = Settings(server={"port": port})
        process = Process(settings, Store(), Telemetry(), {"alpha": RoleParts(loops=(Loop("alpha"),))})
        with pytest.raises(ConfigError) as refused:
            process.serve()
    [line] = refused.value.problems
    assert f"cannot listen on 127.0.0.1:{port}" in line and "--port" in line


def test_a_named_role_fails_with_its_own_error_and_switched_roles_with_the_switch_to_turn_off():
    no_reviewers = Settings(roles={"ingest": False, "otlp": False, "score": False, "drift": False, "review": True})
    with pytest.raises(ConfigError) as named:
        build_process(no_reviewers, ["review"], store=Store())
    assert [p.split(":")[0] for p in named.value.problems] == ["review.users"]
    with pytest.raises(ConfigError) as switched:
        build_process(no_reviewers, store=Store())
    assert [p.split(":")[:2] for p in switched.value.problems] == [["review", " review.users"]]
    with pytest.raises(ValueError, match="nosuch"):
        build_process(no_reviewers, ["nosuch"], store=Store())
    with pytest.raises(ValueError, match="score"):
        build_process(no_reviewers, ["review"], store=Store(), options={"score": {"max_traces": 1}})


NO_ROLES = {"ingest": False, "otlp": False, "score": False, "review": False, "shadow": False}


def with_drift(tmp_path: Path, *, golden: bool = True, agreement: bool = True, **roles: bool | None) -> Settings:
    path = tmp_path / "golden.json"
    write_golden(path, [GoldenCase(id="g1", question="q", category="c", expected_behaviour="refuse",
                                   tags=["single-fact"])])
    return Settings(roles={**NO_ROLES, **roles}, coverage={"golden_path": path if golden else None},
                    drift={"judge_agreement": {"enabled": agreement}})


def test_coverage_and_judge_agreement_run_wherever_drift_runs_unless_switched(tmp_path: Path):
    # they ran inside the drift role before they were roles of their own: a config that set only roles.drift
    # gets them where it got them before, and no more
    assert enabled_roles(with_drift(tmp_path, drift=True)) == ["drift", "judge_agreement", "coverage"]
    assert enabled_roles(with_drift(tmp_path, drift=False, review=True)) == ["review"]
    assert enabled_roles(with_drift(tmp_path, drift=True, coverage=False)) == ["drift", "judge_agreement"]
    assert enabled_roles(with_drift(tmp_path, drift=False, judge_agreement=True)) == ["judge_agreement"]
    # each only with its work configured: a golden set; drift.judge_agreement.enabled
    assert enabled_roles(with_drift(tmp_path, drift=True, golden=False, agreement=False)) == ["drift"]


def test_the_drift_command_starts_them_unless_switched_off_explicitly(tmp_path: Path):
    assert drift_roles(with_drift(tmp_path, drift=False)) == ["drift", "judge_agreement", "coverage"]
    assert drift_roles(with_drift(tmp_path, drift=True, judge_agreement=False)) == ["drift", "coverage"]
    assert drift_roles(with_drift(tmp_path, drift=True, golden=False)) == ["drift", "judge_agreement"]


def test_coverage_and_judge_agreement_are_built_as_roles_with_their_own_loop(tmp_path: Path):
    settings = with_drift(tmp_path, drift=False, coverage=True, judge_agreement=True)
    process = build_process(settings, store=Store())
    assert process.role_names == ["judge_agreement", "coverage"]
    assert [loop.name for loop in process.daemon.roles] == ["judge-agreement", "coverage"]
    assert set(process.health.liveness) == {"judge_agreement_loop", "coverage_loop"}


def test_a_bad_golden_set_is_the_coverage_role_problem_with_its_switch(tmp_path: Path):
    settings = with_drift(tmp_path, drift=False, coverage=True)
    assert settings.coverage.golden_path is not None
    settings.coverage.golden_path.write_text("[]", encoding="utf-8")
    with pytest.raises(ConfigError) as refused:
        build_process(settings, store=Store())
    [line] = refused.value.problems
    assert line.startswith("coverage: coverage.golden_path: ") and "holds no cases" in line, line
    assert startup_problems(settings) == [line]  # `ragmon config check` says the same, without opening anything
    with pytest.raises(ConfigError, match="drift.judge_agreement.enabled is false"):
        build_process(with_drift(tmp_path, agreement=False), ["judge_agreement"], store=Store())
