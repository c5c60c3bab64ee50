"""The judge endpoint of the operations scenario: the project's local OpenAI-compatible server answering like a
busy provider (``tests/support/openai_server.Provider``: latency, verdicts built from the request), switchable to
answering every request 429 (with ``Retry-After``) or 500 for a while. It records when it answered what, so the
harness can tell when the judge worked again after a fault. Test plumbing only.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from tests.support.openai_server import FakeOpenAI, Provider, Step, status

MODES = ("ok", "429", "500")


class Judge:
    """``with Judge() as judge: judge.base_url; judge.mode = "429"``."""

    def __init__(self, *, latency_seconds: float = 0.35, jitter_seconds: float = 0.3, seed: int = 30):
        self.provider = Provider(latency_seconds=latency_seconds, jitter_seconds=jitter_seconds, seed=seed)
        self.mode = "ok"
        self.answers: list[tuple[float, int]] = []  # (when the answer is sent, its status)
        self._lock = threading.Lock()
        self.server = FakeOpenAI(responder=self._respond)

    @property
    def base_url(self) -> str:
        return self.server.base_url

    def __enter__(self) -> Judge:
        self.server.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.__exit__(*exc)

    def _respond(self, request: dict[str, Any]) -> Step:
        mode = self.mode
        if mode == "429":
            step = status(429, "rate limit reached for requests", headers={"retry-after": "1"})
        elif mode == "500":
            step = status(500, "internal error")
        else:
            step = self.provider(request)
        with self._lock:
            self.answers.append((time.time() + step.delay_seconds, step.status))
        return step

    def first_ok_after(self, t: float) -> float | None:
        """When the first 200 after ``t`` was answered (None: none yet)."""
        with self._lock:
            return min((at for at, code in self.answers if at >= t and code == 200), default=None)

    def counts(self) -> dict[int, int]:
        with self._lock:
            out: dict[int, int] = {}
            for _, code in self.answers:
                out[code] = out.get(code, 0) + 1
            return out
