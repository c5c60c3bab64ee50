"""The REAL OpenTelemetry Collector (built by ``scripts/otel-collector``) running the configuration that
docs/otlp.md tells users to copy, with only addresses and the settings under test changed.

``collector_binary()`` finds the cached build (a missing one fails under CI=true, see ``tests/support/missing``;
``collector_path()`` says None instead);
``doc_config()`` reads the YAML block marked ``collector-config`` in docs/otlp.md; ``Collector`` starts the binary
on a configuration and stops it. Test plumbing only.
"""

from __future__ import annotations

import re
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import yaml

from tests.support.missing import missing

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "otlp.md"
_BLOCK = re.compile(r"<!-- collector-config[^>]*-->\s*```yaml\n(.*?)```", re.DOTALL)


NOT_BUILT = "the OpenTelemetry Collector is not built; build it with: scripts/otel-collector build (scripts/setup-system does)"


def collector_path() -> Path | None:
    """The cached build of the Collector, or None when it is not built."""
    result = subprocess.run(["bash", str(ROOT / "scripts" / "otel-collector"), "path"], capture_output=True, text=True,
                            check=False)
    return Path(result.stdout.strip()) if result.returncode == 0 else None


def collector_binary() -> Path:
    path = collector_path()
    if path is None:
        missing(NOT_BUILT)
    return path


def doc_config() -> dict[str, Any]:
    """The Collector configuration of docs/otlp.md, as data."""
    found = _BLOCK.search(DOC.read_text(encoding="utf-8"))
    assert found, f"{DOC} has no ```yaml block after a <!-- collector-config --> marker"
    return yaml.safe_load(found.group(1))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Collector:
    """``with Collector(binary, config, tmp) as c:`` → ``c.otlp_http``: the receiver's OTLP/HTTP traces URL."""

    def __init__(self, binary: Path, config: dict[str, Any], workdir: Path):
        self.binary, self.workdir = binary, workdir
        self.port = free_port()
        config = dict(config)
        receivers = config["receivers"]["otlp"]["protocols"]
        receivers.pop("grpc", None)  # one port to find free is enough; the SDK exporter here speaks http
        receivers["http"]["endpoint"] = f"127.0.0.1:{self.port}"
        # the Collector's own metrics would take port 8888 in every run; off in tests
        config.setdefault("service", {})["telemetry"] = {"metrics": {"level": "none"}, "logs": {"level": "info"}}
        self.config_path = workdir / f"collector-{self.port}.yaml"
        self.config_path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
        self.log_path = workdir / f"collector-{self.port}.log"
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def otlp_http(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1/traces"

    def __enter__(self) -> Collector:
        log = self.log_path.open("wb")
        self.process = subprocess.Popen([str(self.binary), "--config", str(self.config_path)], stdout=log,
                                        stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the Collector exited with {self.process.returncode}:\n{self.log()}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return self
            except OSError:
                time.sleep(0.1)
        self.__exit__(None, None, None)
        raise RuntimeError(f"the Collector did not listen on {self.port} within 60 s:\n{self.log()}")

    def __exit__(self, *exc: object) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()  # the Collector flushes its exporters on SIGTERM
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)

    def log(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")[-4000:]
