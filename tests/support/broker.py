"""A Kafka broker of a test's own, driven only through ``scripts/kafka-broker``, on ports of its choosing.

Tests that take the broker away (a restart, a ``kill -9``) must never touch the shared broker on 9092: each runs
one of these with its own client and controller ports and its state (config, data, pid file, log) under the
test's temporary directory. ``restart`` keeps the data (topics, messages, committed offsets). Test plumbing only:
the assertions it makes are about the script having done what it was asked.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


class Broker:
    """``scripts/kafka-broker`` with this broker's ports and state directory in its environment."""

    def __init__(self, state: Path, port: int, controller_port: int):
        self.state, self.port = state, port
        self.bootstrap = f"127.0.0.1:{port}"
        self.env = dict(os.environ, RAGMON_KAFKA_PORT=str(port), RAGMON_KAFKA_CONTROLLER_PORT=str(controller_port),
                        RAGMON_KAFKA_STATE=str(state), RAGMON_KAFKA_HEAP="-Xms128m -Xmx256m",
                        # after a kill -9 the controller waits for the dead incarnation's session to expire
                        # before the broker may register again: 4 s instead of Kafka's default 9 s
                        RAGMON_KAFKA_EXTRA_PROPERTIES="broker.session.timeout.ms=4000 broker.heartbeat.interval.ms=1000")
        self.env.pop("RAGMON_KAFKA_KEEP_DATA", None)

    def script(self, action: str, check: bool = True) -> str:
        out = subprocess.run([str(ROOT / "scripts" / "kafka-broker"), action], env=self.env, capture_output=True,
                             text=True, timeout=180)
        assert out.returncode == 0 or not check, f"scripts/kafka-broker {action} failed (rc={out.returncode}):\n{out.stdout}{out.stderr}"
        return out.stdout

    def answers(self) -> bool:
        out = subprocess.run([str(ROOT / "scripts" / "kafka-broker"), "status"], env=self.env, capture_output=True,
                             timeout=30)
        return out.returncode == 0

    def pid(self) -> int:
        return int((self.state / "broker.pid").read_text().strip())

    def kill_9(self) -> int:
        pid = self.pid()
        os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while alive(pid):
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after 10s waiting for broker pid {pid} to die")
            time.sleep(0.1)
        return pid


def alive(pid: int) -> bool:
    """Running and not a zombie (a killed process reparented to init may linger as one; it holds no sockets)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"
