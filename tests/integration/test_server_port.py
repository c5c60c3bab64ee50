"""The HTTP port every daemon serves /metrics on: a port in use is one line and exit 2, never a traceback."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from ragmon.errors import ConfigError
from ragmon.server import Health, create_app, serve
from ragmon.telemetry import Telemetry

ROOT = Path(__file__).resolve().parents[2]


def test_a_port_in_use_is_a_config_error_naming_what_to_change():
    app = create_app(Telemetry(), Health())
    first = serve(app, "127.0.0.1", 0)
    try:
        assert httpx.get(f"http://127.0.0.1:{first.port}/healthz", timeout=10).status_code == 200
        with pytest.raises(ConfigError) as info:
            serve(app, "127.0.0.1", first.port)
        [line] = info.value.problems
        assert f"cannot listen on 127.0.0.1:{first.port}" in line and "--port" in line
    finally:
        first.stop()
    with pytest.raises(ConfigError, match="server.host: cannot resolve"):
        serve(app, "no-such-host.invalid", 0)


def test_a_daemon_started_on_a_busy_port_exits_2_with_one_line(tmp_path: Path):
    command = ["drift", "--interval-seconds", "3600"]
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        env = {k: v for k, v in os.environ.items() if not k.startswith("RAGMON_")}
        env.update(RAGMON_STORE__DSN=f"chdb://{tmp_path}/db", PYTHONPATH=str(ROOT))
        done = subprocess.run([sys.executable, "-m", "ragmon", *command, "--port", str(port)], env=env,
                              capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and f"cannot listen on 127.0.0.1:{port}" in done.stderr, done.stderr
