"""The people of the operations scenario: on-call running the runbooks' read commands, reviewers in the web UI.

- ``Gate``: people act only while the daemon serves. A fault that stops the daemon closes the gate and waits for
  the page load or label save under way to finish; the gate opens again once /readyz answers 200. (On-call finds
  the daemon running.) A read command under way is not waited for (some take half a minute): one that a restart
  interrupts is left out of the reads invariant, and counted.
- ``ReadLoop``: every read command named in ``alerts/runbooks/``, then each read command with the options a person
  adds (time ranges, JSON, an HTML file; both lists from ``tests/support/runbooks``), one after the other in a
  loop, each as its own ``ragmon`` process against the daemon's config; a command succeeds when it answers (exit
  0, or 4: too little evidence to answer; a comparison also 1, reject) without a traceback, a ClickHouse exception
  or "in use".
- ``Reviewers``: two reviewers with a real HTTP client (httpx): sign in through the form, load the review queue,
  an item, the triage queue and item, every console page; save a review label through the form and another
  through the JSON API (bearer token), a triage label through its form; sign out, then check that a copy of the
  old session cookie is refused. Each acknowledged save is a ``SavedLabel``; a save refused with a 5xx is a write
  that failed (allowed only while a fault is injected) and is tried again next round.

Test plumbing only: no assertions; everything is recorded as ``Attempt``s.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx

from tests.support.operations.records import Attempt, SavedLabel, WriteFailure
from tests.support.runbooks import read_commands, runbook_reads

ROOT = Path(__file__).resolve().parents[3]
CONSOLE_PAGES = ("/review/console/traces", "/review/console/dead-letters", "/review/console/drift",
                 "/review/console/shadow", "/review/console/gate")
BAD_OUTPUT = ("Traceback", "DB::Exception", " in use")
#: exit codes that are answers, not failures (docs/cli.md): 4 is "too little evidence to answer" (a comparison's
#: hold, a backtest that could assess nothing); a comparison's 1 is its verdict "reject"
ANSWERS = (0, 4)
VERDICTS = {"ragmon shadow compare": (0, 1, 4), "ragmon ab compare": (0, 1, 4)}


class Gate:
    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._open = False
        self._active = 0

    @contextmanager
    def action(self, stop: threading.Event, *, hold: bool = True) -> Iterator[bool]:
        """Wait until the daemon serves (True) or the scenario ends (False); with ``hold``, a stop waits for the
        action to end (a page or a label: a second or two). A read command does not hold the gate: some take
        half a minute, and a restart must come when the plan says; one a restart interrupts is not counted."""
        with self._cond:
            while not self._open and not stop.is_set():
                self._cond.wait(0.5)
            go = self._open and not stop.is_set()
            held = go and hold
            if held:
                self._active += 1
        try:
            yield go
        finally:
            if held:
                with self._cond:
                    self._active -= 1
                    self._cond.notify_all()

    def open(self) -> None:
        with self._cond:
            self._open = True
            self._cond.notify_all()

    def close(self, timeout: float = 600.0) -> None:
        """Let no new action start and wait for the ones under way."""
        deadline = time.monotonic() + timeout
        with self._cond:
            self._open = False
            while self._active and time.monotonic() < deadline:
                self._cond.wait(0.5)


class ReadLoop(threading.Thread):
    def __init__(self, config: Path, workdir: Path, gate: Gate, *, pause_seconds: float):
        super().__init__(name="ops-read-loop", daemon=True)
        self.config, self.workdir, self.gate, self.pause = config, workdir, gate, pause_seconds
        self.stop = threading.Event()
        self.attempts: list[Attempt] = []
        self.workdir.mkdir(parents=True, exist_ok=True)

    def commands(self) -> list[str]:
        """The runbooks' read commands, then the read commands with their options (times relative to now)."""
        return runbook_reads() + ["ragmon " + shlex.join(c) for c in read_commands(self.workdir)]

    def run(self) -> None:
        i = 0
        while not self.stop.is_set():
            commands = self.commands()
            command = commands[i % len(commands)]
            i += 1
            with self.gate.action(self.stop, hold=False) as go:
                if not go:
                    break
                self.attempts.append(self._run(command))
            self.stop.wait(self.pause)

    def _run(self, command: str) -> Attempt:
        started = time.time()
        try:
            out = subprocess.run([sys.executable, "-m", "ragmon", "--config", str(self.config),
                                  *shlex.split(command)[1:]], cwd=self.workdir, capture_output=True, text=True,
                                 timeout=300, env=dict(os.environ, COLUMNS="200", PYTHONPATH=str(ROOT)))
        except subprocess.TimeoutExpired:
            return Attempt("read", command, started, time.time(), False, "no answer within 300 s")
        text = out.stdout + out.stderr
        bad = [b.strip() for b in BAD_OUTPUT if b in text]
        answers = next((codes for prefix, codes in VERDICTS.items() if command.startswith(prefix)), ANSWERS)
        ok = out.returncode in answers and not bad
        detail = "" if ok else f"exit {out.returncode}{', ' + ', '.join(bad) if bad else ''}: " + \
            " | ".join(line.strip() for line in out.stderr.strip().splitlines()[-3:])[:400]
        return Attempt("read", command, started, time.time(), ok, detail, out.returncode)


def csrf_of(html: str) -> str:
    found = re.search(r'name="csrf_token" value="([^"]+)"', html)
    return found.group(1) if found else ""


class Reviewers(threading.Thread):
    """Reviewers working while the daemon runs (see the module docstring)."""

    def __init__(self, base: str, gate: Gate, *, week: str, passwords: dict[str, str], tokens: dict[str, str],
                 queue: list[str], triage: list[str], stored_trace: str, pause_seconds: float,
                 failures: list[WriteFailure]):
        super().__init__(name="ops-reviewers", daemon=True)
        self.base, self.gate, self.week = base, gate, week
        self.passwords, self.tokens = passwords, tokens
        self.queue, self.triage, self.stored_trace = queue, triage, stored_trace
        self.pause = pause_seconds
        self.failures = failures
        self.stop = threading.Event()
        self.attempts: list[Attempt] = []
        self.labels: list[SavedLabel] = []
        self.rounds = 0

    def run(self) -> None:
        while not self.stop.is_set():
            users = sorted(self.passwords)
            user, other = users[self.rounds % len(users)], users[(self.rounds + 1) % len(users)]
            with httpx.Client(base_url=self.base, follow_redirects=False, timeout=60) as client:
                steps: list[tuple[Callable[..., None], tuple[Any, ...]]] = [
                    (self._sign_in, (client, user)), (self._browse, (client,)), (self._review_label, (client, user)),
                    (self._triage_label, (client, user)), (self._api_label, (other,)), (self._sign_out, (client,))]
                for step, args in steps:
                    with self.gate.action(self.stop) as go:
                        if not go:
                            return
                        try:
                            step(*args)
                        except httpx.HTTPError as exc:
                            now = time.time()
                            self.attempts.append(Attempt("page", "request", now, now, False, f"{type(exc).__name__}: {exc}"))
                    if self.stop.wait(self.pause):
                        return
            self.rounds += 1

    # -- the steps ---------------------------------------------------------------------------------------------

    def _record(self, kind: str, what: str, started: float, ok: bool, response: httpx.Response | None = None,
                detail: str = "", write: bool = False) -> bool:
        status = response.status_code if response is not None else None
        if not ok and not detail and response is not None:
            detail = f"HTTP {status}: {_text(response)}"
        self.attempts.append(Attempt(kind, what, started, time.time(), ok, detail, status, write))
        if not ok and write and status is not None and status >= 500:
            self.failures.append(WriteFailure(time.time(), kind, f"{what}: HTTP {status} {_text(response)}"))
        return ok

    def _get(self, client: httpx.Client, url: str, what: str = "") -> httpx.Response:
        started = time.time()
        r = client.get(url)
        self._record("page", what or url, started, r.status_code == 200, r)
        return r

    def _sign_in(self, client: httpx.Client, user: str) -> None:
        started = time.time()
        form = client.get("/review/login")
        r = client.post("/review/login", data={"username": user, "password": self.passwords[user],
                                               "csrf_token": csrf_of(form.text), "next": "/review/"})
        self._record("signin", user, started, r.status_code == 303 and "ragmon_review_session" in client.cookies, r)

    def _browse(self, client: httpx.Client) -> None:
        self._get(client, "/review/")
        self._get(client, f"/review/weeks/{self.week}")
        self._get(client, "/review/triage/")
        for page in CONSOLE_PAGES:
            self._get(client, page)
        self._get(client, f"/review/console/traces/{quote(self.stored_trace, safe='')}", "/review/console/traces/<id>")

    def _next(self, items: list[str]) -> str:
        return items[self.rounds % len(items)]

    def _review_label(self, client: httpx.Client, user: str) -> None:
        trace_id = self._next(self.queue)
        page = self._get(client, f"/review/weeks/{self.week}/items/{quote(trace_id, safe='')}", "review item")
        if page.status_code != 200:
            return
        note = f"ops {user} round {self.rounds}"
        started = time.time()
        r = client.post(f"/review/weeks/{self.week}/label/{quote(trace_id, safe='')}", data={
            "csrf_token": csrf_of(page.text), "answer_correct": "yes", "grounded": "unsure",
            "citations_supported": "no", "refusal_appropriate": "yes", "expected_behaviour": "answer", "note": note})
        if self._record("label", "review label (form)", started, r.status_code == 303, r, write=True):
            self.labels.append(SavedLabel("review", self.week, trace_id, user, note, at=time.time()))

    def _triage_label(self, client: httpx.Client, user: str) -> None:
        trace_id = self._next(self.triage)
        page = self._get(client, f"/review/triage/{self.week}/items/{quote(trace_id, safe='')}", "triage item")
        if page.status_code != 200:
            return
        cause = ("retrieval_miss", "unsupported_claim", "stale_document")[self.rounds % 3]
        note = f"ops triage {user} round {self.rounds}"
        started = time.time()
        r = client.post(f"/review/triage/{self.week}/label/{quote(trace_id, safe='')}",
                        data={"csrf_token": csrf_of(page.text), "cause": cause, "note": note})
        if self._record("triage", "triage label (form)", started, r.status_code == 303, r, write=True):
            self.labels.append(SavedLabel("triage", self.week, trace_id, user, note, cause, time.time()))

    def _api_label(self, user: str) -> None:
        trace_id = self._next(list(reversed(self.queue)))
        note = f"ops api {user} round {self.rounds}"
        started = time.time()
        r = httpx.put(f"{self.base}/review/api/v1/weeks/{self.week}/items/{quote(trace_id, safe='')}/label",
                      headers={"Authorization": f"Bearer {self.tokens[user]}"}, timeout=60,
                      json={"answer_correct": True, "grounded": True, "citations_supported": None,
                            "refusal_appropriate": True, "expected_behaviour": "answer", "note": note})
        if self._record("label", "review label (API)", started, r.status_code == 200, r, write=True):
            self.labels.append(SavedLabel("review", self.week, trace_id, user, note, at=time.time()))

    def _sign_out(self, client: httpx.Client) -> None:
        page = client.get("/review/")
        copied = dict(client.cookies)
        started = time.time()
        r = client.post("/review/logout", data={"csrf_token": csrf_of(page.text)})
        if not self._record("signout", "sign-out", started, r.status_code == 303, r, write=True):
            return
        started = time.time()
        with httpx.Client(base_url=self.base, follow_redirects=False, timeout=60, cookies=copied) as thief:
            again = thief.get("/review/")
        refused = again.status_code == 303 and again.headers.get("location", "").startswith("/review/login")
        self._record("session_ended", "a copy of the signed-out cookie", started, refused, again,
                     "" if refused else f"HTTP {again.status_code}: the signed-out session still works")


def _text(response: httpx.Response | None) -> str:
    if response is None:
        return ""
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", response.text))[:200]

