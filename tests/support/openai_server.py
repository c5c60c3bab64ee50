"""A local OpenAI-compatible chat-completions server for judge tests: a real socket, the real protocol.

``FakeOpenAI`` listens on 127.0.0.1 (a free port), answers ``POST /v1/chat/completions`` with scripted steps
(good JSON, malformed JSON, slow answers, 429 with Retry-After, 5xx…; a request with ``"stream": true`` gets its
answer as server-sent chunks) and records every request body and
Authorization header so tests can check what the judge sent. When the script is empty, ``responder`` (if
given) builds the answer from the request.
"""

from __future__ import annotations

import heapq
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


class _QuietServer(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        import sys

        if not isinstance(sys.exc_info()[1], ConnectionError):  # a client that went away (killed, timed out)
            super().handle_error(request, client_address)


class FakeOpenAI:
    """Context manager: ``with FakeOpenAI([ok({...}), status(429)]) as srv: srv.base_url``."""

    def __init__(self, steps: list[Step] | None = None, responder: Callable[[dict], Step] | None = None):
        self.steps: deque[Step] = deque(steps or [])
        self.responder = responder
        self.requests: list[dict[str, Any]] = []
        self.auth_headers: list[str | None] = []
        self.paths: list[str] = []
        self._lock = threading.Lock()
        self._server = _QuietServer(("127.0.0.1", 0), self._handler())
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
                kind = "application/json"
                if body is None and request.get("stream") and step.status == 200:
                    body, kind = _stream(step, request), "text/event-stream"
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
                    self.send_header("Content-Type", kind)
                    self.send_header("Content-Length", str(len(body)))
                    for k, v in step.headers.items():
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client timed out and went away: that is the point of a slow step

        return Handler


def _stream(step: Step, request: dict) -> bytes:
    """A streamed chat completion (``"stream": true``), as server-sent events: the content a word a chunk, a last
    chunk with the finish reason, a usage chunk when ``stream_options.include_usage`` asks for one, ``[DONE]``."""
    content = step.content if isinstance(step.content, str) else json.dumps(step.content)
    words = content.split(" ")
    base = {"id": "chatcmpl-test", "object": "chat.completion.chunk", "created": int(time.time()), "model": step.model}
    chunks = [{**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}]}]
    chunks += [{**base, "choices": [{"index": 0, "delta": {"content": w if i == 0 else " " + w},
                                     "finish_reason": None}]} for i, w in enumerate(words)]
    chunks.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    if (request.get("stream_options") or {}).get("include_usage"):
        chunks.append({**base, "choices": [], "usage": {
            "prompt_tokens": step.prompt_tokens, "completion_tokens": step.completion_tokens,
            "total_tokens": step.prompt_tokens + step.completion_tokens}})
    return b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks) + b"data: [DONE]\n\n"


# -- a provider with latency, a request limit and occasional failures (tests and bench/judge_throughput.py) ------

def verdicts_for(request: dict) -> dict:
    """A well-formed verdict for the trace in a judge request: every answer sentence a claim supported by a quote
    that really is in the first context chunk, every citation supporting, every chunk relevant."""
    user = next(m["content"] for m in request.get("messages", []) if m.get("role") == "user")
    payload = json.loads(user[user.index("{"): user.rindex("}") + 1])
    chunks = [c for c in payload.get("context_chunks", []) if c.get("text")]
    evidence = [{"chunk_id": chunks[0]["chunk_id"], "quote": chunks[0]["text"][:60]}] if chunks else []
    return {
        "claims": [{"claim": s["text"], "supported": "yes" if evidence else "unsure", "evidence": evidence}
                   for s in payload.get("answer_sentences", [])],
        "citations": [{"index": c["index"], "supports": "yes", "quote": ""} for c in payload.get("citations", [])],
        "answer_relevance": 0.8,
        "answerable": "yes" if chunks else "no",
        "chunks": [{"chunk_id": c["chunk_id"], "relevant": True} for c in payload.get("context_chunks", [])],
        "answer_is_refusal": False,
    }


@dataclass
class Provider:
    """A responder that behaves like a busy provider: ``latency_seconds`` ± ``jitter_seconds`` (uniform) per answer,
    at most ``requests_per_minute`` (a token bucket with one second of burst; beyond it an immediate 429 with
    ``retry-after-ms``, the time until the next request would pass), a share ``error_rate`` of 500s, and a share
    ``hang_rate`` of calls that hang for ``hang_seconds`` (longer than a client's timeout: the client gives up).
    Counts what it answered and the most requests it held at once. Seeded: the same seed, the same dice."""

    latency_seconds: float = 0.0
    jitter_seconds: float = 0.0
    requests_per_minute: float | None = None
    error_rate: float = 0.0
    seed: int = 1
    prompt_tokens: int = 900
    completion_tokens: int = 150
    counts: dict[str, int] = field(default_factory=lambda: {"ok": 0, "429": 0, "500": 0, "hang": 0})
    in_flight: int = 0
    peak_in_flight: int = 0
    hang_rate: float = 0.0
    hang_seconds: float = 120.0

    def __post_init__(self) -> None:
        import random

        self._rng = random.Random(self.seed)
        self._lock = threading.Lock()
        self._level = max(1.0, (self.requests_per_minute or 0) / 60.0)
        self._at = time.monotonic()
        self._ends: list[float] = []

    def __call__(self, request: dict) -> Step:
        with self._lock:
            if self.requests_per_minute:
                per_second = self.requests_per_minute / 60.0
                now = time.monotonic()
                self._level = min(max(1.0, per_second), self._level + (now - self._at) * per_second)
                self._at = now
                if self._level < 1.0:
                    self.counts["429"] += 1
                    wait = (1.0 - self._level) / per_second
                    return status(429, "rate limit reached for requests", headers={
                        "retry-after-ms": str(int(wait * 1000) + 1), "retry-after": str(int(wait) + 1)})
                self._level -= 1.0
            delay = max(0.0, self.latency_seconds + self._rng.uniform(-1, 1) * self.jitter_seconds)
            failed = self._rng.random() < self.error_rate
            if self.hang_rate and self._rng.random() < self.hang_rate:
                delay = self.hang_seconds
                self.counts["hang"] += 1
            self.counts["500" if failed else "ok"] += 1
            now = time.monotonic()
            while self._ends and self._ends[0] <= now:
                heapq.heappop(self._ends)
            heapq.heappush(self._ends, now + delay)  # the answer is on its way until then
            self.in_flight = len(self._ends)
            self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
        if failed:
            return status(500, "internal error", delay_seconds=delay)
        return ok(verdicts_for(request), delay_seconds=delay, prompt_tokens=self.prompt_tokens,
                  completion_tokens=self.completion_tokens)


def main() -> None:
    """Serve a ``Provider`` on 127.0.0.1 until SIGTERM; print the base URL, then (on exit) the counts as JSON."""
    import argparse
    import signal
    import sys

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--latency-ms", type=float, default=800)
    parser.add_argument("--jitter-ms", type=float, default=300)
    parser.add_argument("--rpm", type=float, default=None, help="requests per minute before 429s (default: none)")
    parser.add_argument("--error-rate", type=float, default=0.01, help="share of requests answered 500")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--hang-rate", type=float, default=0.0, help="share of requests that hang (no answer)")
    parser.add_argument("--hang-ms", type=float, default=120_000, help="how long a hanging request holds on")
    args = parser.parse_args()
    provider = Provider(args.latency_ms / 1000, args.jitter_ms / 1000, args.rpm, args.error_rate, args.seed,
                        hang_rate=args.hang_rate, hang_seconds=args.hang_ms / 1000)
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    with FakeOpenAI(responder=provider) as server:
        print(server.base_url, flush=True)
        done.wait()
    print(json.dumps({**provider.counts, "peak_in_flight": provider.peak_in_flight}), flush=True)
    sys.exit(0)


if __name__ == "__main__":
    main()
