"""Running the real Prometheus and Alertmanager binaries (Debian's prometheus and prometheus-alertmanager packages)
in the end-to-end tests: finding them, free loopback ports, child processes stopped at the end, bounded polling,
and the alert rules with shortened hold times. Never sleeps and hopes: every wait polls an event with a deadline.
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import yaml

from tests.support.collector import free_port as free_port  # re-exported: the Prometheus tests take it from here
from tests.support.missing import missing

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "alerts" / "ragmon.rules.yaml"


def binary(*names: str, package: str) -> str:
    """The first of ``names`` on PATH; fails under CI (skips elsewhere) naming the Debian package to install."""
    for name in names:
        path = shutil.which(name)
        if path is not None:
            return path
    missing(f"{' / '.join(names)} not found; install Debian's {package} package (apt-get install -y {package}, "
            "or scripts/setup-system)")


def get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=5) as response:  # noqa: S310 - loopback URLs built by the test
        return json.loads(response.read())


def until(what: str, probe: Callable[[], Any], timeout: float, *, every: float = 0.2) -> Any:
    """Poll ``probe`` until it returns something truthy (returned); ``AssertionError`` naming ``what`` and the last
    result (or connection error) once ``timeout`` seconds have passed."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = probe()
        except (urllib.error.URLError, ConnectionError, TimeoutError, json.JSONDecodeError) as exc:
            last = exc
        else:
            if last:
                return last
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}; last: {last!r}")


class Process:
    """A child process with its output in ``log``; ``stop`` sends SIGTERM, then SIGKILL after 30 s."""

    def __init__(self, args: list[str], env: dict[str, str] | None, log: Path):
        self.log = log
        self._file = log.open("wb")
        self.proc = subprocess.Popen(args, env=env, stdout=self._file, stderr=subprocess.STDOUT)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self._file.close()

    def alive(self) -> bool:
        if self.proc.poll() is not None:
            raise AssertionError(f"{self.proc.args[0]} exited with "
                                 f"{self.proc.returncode}:\n{self.log.read_text()[-3000:]}")
        return True


def rules_with_hold(hold: str, alerts: Iterable[str] | None = None) -> dict[str, Any]:
    """alerts/ragmon.rules.yaml with the ``for`` of ``alerts`` (every alert when None) set to ``hold``, nothing else
    changed: the real holds (5 minutes to 3 days) would make an end-to-end test wait that long."""
    names = None if alerts is None else set(alerts)
    rules = yaml.safe_load(RULES.read_text())
    for group in rules["groups"]:
        for rule in group["rules"]:
            if "alert" in rule and (names is None or rule["alert"] in names):
                rule["for"] = hold
    return rules
