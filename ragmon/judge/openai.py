"""``OpenAIJudge``: a pinned LLM judge over any OpenAI-compatible ``/v1/chat/completions`` endpoint (httpx).

Owns the HTTP exchange: strict JSON-schema structured output at temperature 0 by default, retries with
exponential backoff and full jitter on 429, 5xx, timeouts and connection errors (``Retry-After`` honoured up to
the cap) within one deadline per trace, malformed output retried once more, token and cost accounting per
call, and a verdict cache keyed by (trace content hash, fingerprint). Every HTTP attempt passes the judge's
``CallLimiter`` (``judge.requests_per_minute``, ``judge.tokens_per_minute``, the rate learnt from 429s,
``Retry-After`` pauses, and the concurrency learnt from the endpoint's latency up to ``max_in_flight``), which all
threads calling this judge share; the connection pool holds ``max_in_flight`` connections, one per concurrent
call. httpx exceptions are translated here into ``JudgeError``/
``RetryableJudgeError``; nothing above sees an httpx exception. The API key is a ``SecretStr`` and never appears
in a message or log line. Thread-safe if the injected callables are.
"""

from __future__ import annotations

import logging
import math
import random
import time
from collections.abc import Callable
from typing import Any

import httpx
from opentelemetry.trace import SpanKind
from pydantic import SecretStr

from ragmon.config import mask_url
from ragmon.errors import JudgeError, RetryableJudgeError
from ragmon.judge.base import JudgeInput, Judgement, Usage, fingerprint
from ragmon.judge.cache import VerdictCache
from ragmon.judge.limits import CallLimiter, Permit, estimate_tokens
from ragmon.judge.metrics import JudgeMetrics
from ragmon.judge.parse import MalformedOutput, parse_verdicts
from ragmon.judge.prompt import PARSER_VERSION, render_messages, response_format, template_text
from ragmon.metrics.verdicts import Verdicts
from ragmon.telemetry import Telemetry
from ragmon.tracing import span

log = logging.getLogger(__name__)


class OpenAIJudge:
    """An LLM judge pinned by its fingerprint. See the module docstring for the retry and cache rules."""

    name = "openai"
    #: a call waits on the network: worth running many at once (see ``ragmon.judge.pool``)
    io_bound = True

    def __init__(
        self,
        *,
        base_url: str,
        model: str,
        model_version: str = "",
        api_key: SecretStr | None = None,
        temperature: float = 0.0,
        timeout_seconds: float = 30.0,
        deadline_seconds: float = 120.0,
        max_attempts: int = 6,
        backoff_initial_seconds: float = 0.5,
        backoff_max_seconds: float = 20.0,
        max_output_tokens: int = 2000,
        max_chunk_chars: int = 4000,
        input_usd_per_million_tokens: float = 0.0,
        output_usd_per_million_tokens: float = 0.0,
        cache_max_entries: int = 10_000,
        max_in_flight: int = 64,
        adaptive_concurrency: bool = True,
        requests_per_minute: float | None = None,
        tokens_per_minute: float | None = None,
        limiter: CallLimiter | None = None,
        telemetry: Telemetry | None = None,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
        jitter: Callable[[], float] = random.random,
        transport: httpx.BaseTransport | None = None,
    ):
        self.model = model
        self.model_version = model_version
        self.base_url = base_url.rstrip("/") + "/"
        self.temperature = temperature
        self.timeout_seconds = timeout_seconds
        self.deadline_seconds = deadline_seconds
        self.max_attempts = max_attempts
        self.backoff_initial = backoff_initial_seconds
        self.backoff_max = backoff_max_seconds
        self.max_output_tokens = max_output_tokens
        self.max_chunk_chars = max_chunk_chars
        self.price_in = input_usd_per_million_tokens
        self.price_out = output_usd_per_million_tokens
        self.cache = VerdictCache(cache_max_entries)
        self.max_in_flight = max_in_flight
        # the limiter keeps real time even when a test injects ``clock``: its waits are real waits
        self.limiter = limiter or CallLimiter(requests_per_minute=requests_per_minute,
                                              tokens_per_minute=tokens_per_minute,
                                              max_pause_seconds=backoff_max_seconds, max_in_flight=max_in_flight,
                                              adaptive_concurrency=adaptive_concurrency, telemetry=telemetry)
        #: the judge's metrics (calls, tokens, spend), registered on ``telemetry`` if given; a judge without them
        #: leaves counting its calls to the scorer (``LiveScorer``)
        self.metrics = telemetry.use(JudgeMetrics) if telemetry is not None else None
        self._sleep, self._clock, self._jitter = sleep, clock, jitter
        self.fingerprint = fingerprint(
            judge=self.name, model=model, model_version=model_version, prompt_template=template_text(),
            temperature=temperature, parser_version=PARSER_VERSION, max_chunk_chars=max_chunk_chars,
        )
        headers = {"Content-Type": "application/json"}
        if api_key is not None and api_key.get_secret_value():
            headers["Authorization"] = f"Bearer {api_key.get_secret_value()}"
        self._http = httpx.Client(base_url=self.base_url, headers=headers, transport=transport,
                                  timeout=httpx.Timeout(timeout_seconds),
                                  limits=httpx.Limits(max_connections=max_in_flight,
                                                      max_keepalive_connections=max_in_flight))
        self._served_model_warned = False

    @classmethod
    def from_settings(cls, settings: Any, **kwargs: Any) -> OpenAIJudge:
        """Build from ``JudgeSettings`` (the ``judge`` config section)."""
        s = settings
        return cls(
            base_url=s.base_url, model=s.model, model_version=s.model_version, api_key=s.api_key,
            temperature=s.temperature, timeout_seconds=s.timeout_seconds, deadline_seconds=s.deadline_seconds,
            max_attempts=s.max_attempts, backoff_initial_seconds=s.backoff_initial_seconds,
            backoff_max_seconds=s.backoff_max_seconds, max_output_tokens=s.max_output_tokens,
            max_chunk_chars=s.max_chunk_chars, input_usd_per_million_tokens=s.input_usd_per_million_tokens,
            output_usd_per_million_tokens=s.output_usd_per_million_tokens, cache_max_entries=s.cache_max_entries,
            max_in_flight=s.max_in_flight, adaptive_concurrency=s.adaptive_concurrency,
            requests_per_minute=s.requests_per_minute,
            tokens_per_minute=s.tokens_per_minute, **kwargs,
        )

    def judge(self, trace: Any) -> Verdicts:
        return self.assess(JudgeInput.of(trace)).verdicts

    def estimate_cost_usd(self, item: JudgeInput) -> float:
        """What one judgement of ``item`` may cost at most, before it is made: the prompt at ``CHARS_PER_TOKEN``
        and a full ``max_output_tokens`` answer. The daily budget reserves it while the call is in flight."""
        if (self.price_in == 0 and self.price_out == 0) or self.cache.peek(item.content_hash, self.fingerprint):
            return 0.0
        prompt = estimate_tokens(render_messages(item, max_chunk_chars=self.max_chunk_chars))
        return (prompt * self.price_in + self.max_output_tokens * self.price_out) / 1_000_000

    def assess(self, item: JudgeInput) -> Judgement:
        """Judge one trace, retrying within the deadline; raise ``JudgeError`` rather than guess.

        Traced as one client span (OpenTelemetry GenAI conventions) covering every attempt; it carries the
        model, token counts and attempts, never the prompt or the trace's text."""
        with span(f"chat {self.model}", {
            "gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai", "gen_ai.request.model": self.model,
            "gen_ai.request.temperature": self.temperature, "gen_ai.request.max_tokens": self.max_output_tokens,
            "server.address": httpx.URL(self.base_url).host, "ragmon.judge.fingerprint": self.fingerprint,
        }, kind=SpanKind.CLIENT) as current:
            judgement = self._assess(item)
            current.set_attributes({
                "gen_ai.usage.input_tokens": judgement.usage.prompt_tokens,
                "gen_ai.usage.output_tokens": judgement.usage.completion_tokens,
                "ragmon.judge.attempts": judgement.usage.attempts, "ragmon.judge.cached": judgement.usage.cached,
            })
            return judgement

    def _assess(self, item: JudgeInput) -> Judgement:
        key, start = item.content_hash, self._clock()
        while True:
            cached = self.cache.get(key, self.fingerprint)
            if cached is not None:
                return Judgement(cached, Usage(cached=True))
            owner = self.cache.claim(key, self.fingerprint)
            if owner is None:
                break
            # the same content is being judged by another thread: its verdict is ours (or, if it failed, a retry)
            owner.wait(max(0.0, self.deadline_seconds - (self._clock() - start)))
        try:
            return self._call(item, key, start)
        finally:
            self.cache.release(key, self.fingerprint)

    def _call(self, item: JudgeInput, key: str, start: float) -> Judgement:
        body = {
            "model": self.model,
            "temperature": self.temperature,
            "max_tokens": self.max_output_tokens,
            "messages": render_messages(item, max_chunk_chars=self.max_chunk_chars),
            "response_format": response_format(),
        }
        reserve = estimate_tokens(body["messages"]) + self.max_output_tokens
        prompt_tokens = completion_tokens = attempts = 0
        malformed_left = 1
        while True:
            attempts += 1
            remaining = self.deadline_seconds - (self._clock() - start)
            retry_after: float | None = None
            permit = self._permit(reserve, remaining)
            status, used = None, None
            try:
                response = self._http.post("chat/completions", json=body,
                                           timeout=max(0.05, min(self.timeout_seconds, remaining)))
            except httpx.TimeoutException:
                error: JudgeError = RetryableJudgeError(
                    f"judge request timed out after {min(self.timeout_seconds, remaining):.1f}s")
            except httpx.TransportError as exc:
                error = RetryableJudgeError(f"cannot reach the judge endpoint {mask_url(self.base_url)}: "
                                            f"{type(exc).__name__}")
            else:
                status = response.status_code
                error, retry_after, usage = self._read(response, item)
                prompt_tokens += usage[0]
                completion_tokens += usage[1]
                used = usage[0] + usage[1] if status == 200 else None
            finally:
                self.limiter.release(permit, status=status, retry_after=retry_after, tokens_used=used)
            if isinstance(error, Verdicts):
                verdicts = error
                self._count("ok")
                self.cache.put(key, self.fingerprint, verdicts)
                return Judgement(verdicts, self._usage(prompt_tokens, completion_tokens, attempts))
            if isinstance(error, MalformedOutput):
                if malformed_left == 0:
                    error.retryable = False
                malformed_left -= 1
            if not error.retryable:
                self._count("error")
                self._account(prompt_tokens, completion_tokens)
                raise JudgeError(f"{error} (after {attempts} attempt{'s' if attempts > 1 else ''})")
            delay = min(self.backoff_max, self.backoff_initial * 2 ** (attempts - 1)) * self._jitter()
            if retry_after is not None:
                delay = max(delay, min(retry_after, self.backoff_max))
            elapsed = self._clock() - start
            if attempts >= self.max_attempts or elapsed + delay >= self.deadline_seconds:
                self._count("error")
                self._account(prompt_tokens, completion_tokens)
                raise RetryableJudgeError(
                    f"judge gave up after {attempts} attempts in {elapsed:.1f}s "
                    f"(judge.max_attempts={self.max_attempts}, judge.deadline_seconds={self.deadline_seconds:g}): "
                    f"{error}"
                )
            self._count("retry")
            self._sleep(delay)

    def _permit(self, tokens: int, remaining: float) -> Permit:
        """Wait for the limiter (rate, tokens, Retry-After pause) within what is left of the deadline."""
        permit = self.limiter.acquire(tokens, timeout=max(0.0, remaining))
        if permit is None:
            self._count("error")
            raise RetryableJudgeError(
                f"judge call not sent: the rate limit (judge.requests_per_minute, judge.tokens_per_minute, 429 "
                f"answers) would hold it past judge.deadline_seconds={self.deadline_seconds:g}")
        return permit

    def _read(self, response: httpx.Response, item: JudgeInput) -> tuple[Any, float | None, tuple[int, int]]:
        """(Verdicts or the error, Retry-After seconds, (prompt tokens, completion tokens))."""
        status = response.status_code
        if status == 429 or status >= 500:
            return (RetryableJudgeError(f"judge endpoint answered HTTP {status}: {_excerpt(response)}"),
                    _retry_after(response), (0, 0))
        if status in (401, 403):
            return (JudgeError(f"judge endpoint refused the API key (HTTP {status}); set RAGMON_JUDGE__API_KEY "
                               "or judge.api_key_file"), None, (0, 0))
        if status != 200:
            return (JudgeError(f"judge endpoint answered HTTP {status}: {_excerpt(response)} — check judge.base_url "
                               "and judge.model"), None, (0, 0))
        try:
            data = response.json()
            usage = data.get("usage") or {}
            tokens = (int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0))
            message = data["choices"][0]["message"]
        except (ValueError, KeyError, IndexError, TypeError, AttributeError):
            return MalformedOutput("judge endpoint sent a non-chat-completion body: "
                                   f"{_excerpt(response)}"), None, (0, 0)
        self._check_served_model(str(data.get("model") or ""))
        if message.get("refusal"):
            return MalformedOutput(f"the judge model refused: {str(message['refusal'])[:200]}"), None, tokens
        try:
            return parse_verdicts(message.get("content"), item, self.fingerprint), None, tokens
        except MalformedOutput as exc:
            return exc, None, tokens

    def _usage(self, prompt_tokens: int, completion_tokens: int, attempts: int) -> Usage:
        cost = self._account(prompt_tokens, completion_tokens)
        return Usage(prompt_tokens, completion_tokens, cost, attempts, False)

    def _account(self, prompt_tokens: int, completion_tokens: int) -> float:
        cost = (prompt_tokens * self.price_in + completion_tokens * self.price_out) / 1_000_000
        if self.metrics is not None:
            self.metrics.judge_tokens.labels("prompt").inc(prompt_tokens)
            self.metrics.judge_tokens.labels("completion").inc(completion_tokens)
            self.metrics.judge_cost_usd.inc(cost)
        return cost

    def _count(self, outcome: str) -> None:
        if self.metrics is not None:
            self.metrics.judge_calls.labels(self.name, outcome).inc()

    def _check_served_model(self, served: str) -> None:
        # a provider that silently serves another model breaks the pin; say so once, loudly
        if served and not served.startswith(self.model) and not self._served_model_warned:
            self._served_model_warned = True
            log.warning("judge endpoint served model %r, but the pinned judge model is %r (fingerprint %s): "
                        "verdicts may not match the calibration", served, self.model, self.fingerprint)

    def close(self) -> None:
        self._http.close()


def _retry_after(response: httpx.Response) -> float | None:
    """Seconds from ``retry-after-ms`` (OpenAI, Azure OpenAI: finer than whole seconds) or ``Retry-After``."""
    for header, scale in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        value = response.headers.get(header)
        if value is None:
            continue
        try:
            seconds = float(value) / scale
        except ValueError:
            continue
        if math.isfinite(seconds):
            return max(0.0, seconds)
    return None


def _excerpt(response: httpx.Response) -> str:
    text = response.text.strip().replace("\n", " ")
    return (text[:200] + "…") if len(text) > 200 else (text or "(empty body)")
