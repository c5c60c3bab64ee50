"""`ragmon review` as an operator starts it: a subprocess with its own chDB directory, users from the environment,
a session key from a file; the UI refuses anonymous requests, /metrics and /healthz answer, SIGTERM stops it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import httpx

from ragmon.review.auth import hash_password


def test_review_serve_subprocess(tmp_path):
    key = tmp_path / "session.key"
    key.write_text("k" * 64)
    env = {**os.environ, "RAGMON_STORE__DSN": f"chdb://{tmp_path / 'ch'}", "RAGMON_SERVER__PORT": "0",
           "RAGMON_REVIEW__USERS": f'[{{"username": "alice", "password_hash": "{hash_password("pass-word-1")}"}}]',
           "RAGMON_REVIEW__SESSION_SECRET_FILE": str(key)}
    proc = subprocess.Popen([sys.executable, "-m", "ragmon", "review"], env=env, cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        assert "review UI on http://" in line, line + proc.stderr.read()
        base = line.split("review UI on ")[1].split("/review/")[0]
        r = httpx.get(f"{base}/review/", follow_redirects=False)
        assert r.status_code == 303 and r.headers["location"].startswith("/review/login")
        assert httpx.get(f"{base}/review/api/v1/weeks").status_code == 401
        login = httpx.get(f"{base}/review/login")
        assert login.status_code == 200 and "Sign in" in login.text
        assert "ragmon_build_info" in httpx.get(f"{base}/metrics").text
        deadline = time.monotonic() + 10
        while httpx.get(f"{base}/healthz").status_code != 200 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert httpx.get(f"{base}/healthz").status_code == 200
        assert httpx.get(f"{base}/readyz").status_code == 200
    finally:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=30)
    assert code == 0, proc.stderr.read()


def test_review_serve_refuses_to_start_without_users(tmp_path):
    env = {**os.environ, "RAGMON_STORE__DSN": f"chdb://{tmp_path / 'ch'}", "RAGMON_SERVER__PORT": "0"}
    env.pop("RAGMON_REVIEW__USERS", None)
    r = subprocess.run([sys.executable, "-m", "ragmon", "review"], env=env, cwd=tmp_path, capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 2 and "no reviewers configured" in r.stderr and "Traceback" not in r.stderr
