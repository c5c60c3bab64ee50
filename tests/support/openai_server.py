"""A local OpenAI-compatible chat-completions server for judge tests: a real socket, the real protocol.

``FakeOpenAI`` listens on 127.0.0.1 (a free port), answers ``POST /v1/chat/completions`` with scripted steps
(good JSON, malformed JSON, slow answers, 429 with Retry-After, 5xx…) and records every request body and
Authorization header so tests can check what the judge sent. When the script is empty, ``responder`` (if
given) builds the answer from the request.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Step:
    """One scripted answer. ``content`` (str or JSON-able) becomes the assistant message of a 200 answer."""

    status: int = 200
    content: Any = None
    body: bytes | None = None  # raw body instead of a chat completion
    headers: dict[str, str] = field(default_factory=dict)
    delay_seconds: float = 0.0
    prompt_tokens: int = 120
    completion_tokens: int = 40
    model: str = "judge-model"


def ok(content: Any, **kw: Any) -> Step:
    return Step(content=content, **kw)


def status(code: int, text: str = "", **kw: Any) -> Step:
    return Step(status=code, body=json.dumps({"error": {"message": text or f"status {code}"}}).encode(), **kw)


class FakeOpenAI:
    """Context manager: ``with FakeOpenAI([ok({...}), status(429)]) as srv: srv.base_url``."""

    def __init__(self, steps: list[Step] | None = None, responder: Callable[[dict], Step] | None = None):
        self.steps: deque[Step] = deque(steps or [])
        self.responder = responder
        self.requests: list[dict[str, Any]] = []
        self.auth_headers: list[str | None] = []
        self.paths: list[str] = []
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def __enter__(self) -> FakeOpenAI:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def _next(self, request: dict) -> Step:
        with self._lock:
            if self.steps:
                return self.steps.popleft()
        if self.responder is not None:
            return self.responder(request)
        return status(500, "script exhausted")

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # keep pytest output clean
                pass

            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                try:
                    request = json.loads(raw)
                except ValueError:
                    request = {"_unparseable": raw.decode("utf-8", "replace")}
                with fake._lock:
                    fake.requests.append(request)
                    fake.auth_headers.append(self.headers.get("Authorization"))
                    fake.paths.append(self.path)
                if self.path != "/v1/chat/completions":
                    return self._send(Step(status=404, body=b'{"error":{"message":"not found"}}'), request)
                self._send(fake._next(request), request)

            def _send(self, step: Step, request: dict) -> None:
                if step.delay_seconds:
                    time.sleep(step.delay_seconds)
                body = step.body
                if body is None:
                    content = step.content if isinstance(step.content, str) else json.dumps(step.content)
                    body = json.dumps({
                        "id": "chatcmpl-test", "object": "chat.completion", "created": int(time.time()),
                        "model": step.model,
                        "choices": [{"index": 0, "finish_reason": "stop",
                                     "message": {"role": "assistant", "content": content}}],
                        "usage": {"prompt_tokens": step.prompt_tokens, "completion_tokens": step.completion_tokens,
                                  "total_tokens": step.prompt_tokens + step.completion_tokens},
                    }).encode()
                try:
                    self.send_response(step.status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(body)))
                    for k, v in step.headers.items():
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client timed out and went away: that is the point of a slow step

        return Handler
