"""A ``ragmon`` command running as a subprocess, as a user starts it, with its standard error read line by line
as it comes (so a test can wait for a line while the command still runs), a stop by signal that fails on a hang,
and a kill for clean-up. Owns no command's expectations: tests say what to wait for."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: generous bounds that only catch a hang (no test measures speed with them)
WAIT_SECONDS = 120
EXIT_SECONDS = 60


class CliProcess:
    """``ragmon ARGS…`` in ``ROOT`` with ``env`` added to this process's environment (``PYTHONPATH`` is the
    checkout's); ``stdin`` a ``subprocess`` constant (default: nothing to read)."""

    def __init__(self, args: list[str], env: dict[str, str], *, stdin: int | None = None):
        self.lines: list[str] = []
        self._seen = threading.Condition()
        self.proc = subprocess.Popen(
            [sys.executable, "-c", "from ragmon.cli.app import main; main()", *args], cwd=ROOT,
            stdin=stdin if stdin is not None else subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE, env=dict(os.environ, PYTHONPATH=str(ROOT), COLUMNS="200", **env))
        threading.Thread(target=self._collect, daemon=True).start()

    def _collect(self) -> None:
        assert self.proc.stderr is not None
        for raw in self.proc.stderr:
            with self._seen:
                self.lines.append(raw.decode(errors="replace").rstrip("\n"))
                self._seen.notify_all()

    @property
    def stderr(self) -> str:
        return "\n".join(self.lines)

    def wait_for(self, text: str, times: int = 1) -> str:
        """The ``times``-th line of standard error containing ``text``, printed while the process still runs."""
        def seen() -> list[str]:
            return [x for x in self.lines if text in x]

        with self._seen:
            self._seen.wait_for(lambda: len(seen()) >= times or self.proc.poll() is not None, WAIT_SECONDS)
            found = seen()
        assert len(found) >= times and self.proc.poll() is None, (
            f"{text!r} not printed {times}x while running (exit {self.proc.poll()}):\n" + "\n".join(self.lines[-40:]))
        return found[times - 1]

    def wait(self, seconds: float = WAIT_SECONDS) -> int:
        """The exit code, once the command ends by itself within ``seconds`` (killed and failed otherwise)."""
        try:
            return self.proc.wait(seconds)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"still running after {seconds}s:\n{self.stderr[-3000:]}") from None

    def stop(self, sig: int) -> int:
        """Send ``sig`` and wait for the exit; a process still there after EXIT_SECONDS is a hang (killed)."""
        self.proc.send_signal(sig)
        try:
            rc = self.proc.wait(EXIT_SECONDS)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"still running {EXIT_SECONDS}s after {signal.Signals(sig).name}:\n"
                                 f"{self.stderr[-3000:]}") from None
        finally:
            if self.proc.stdin is not None:
                self.proc.stdin.close()
        return rc

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
