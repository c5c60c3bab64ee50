"""The review pages through FastAPI's TestClient against chDB: access, CSRF, escaping, hidden verdicts, labels
and disagreement, signing out, gauges. Signing in itself: ``tests/unit/review/test_sign_in.py``."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest
from fastapi.testclient import TestClient

from ragmon.review.selection import select_week
from tests.integration.review.support import (
    PASSWORDS,
    csrf_of,
    insert_score,
    insert_traces,
    review_app,
    signed_in,
    week_traces,
)

HOSTILE = '<script>window.__pwned=1</script><img src=x onerror="window.__pwned=2">'


@pytest.fixture
def queue(store, review):
    week, traces = week_traces(12, ["billing", "consent"], seed=7)
    evil = traces[0]
    evil["question"] = f"What does {HOSTILE} mean?"
    evil["answer"] = f"It means {HOSTILE}. Done."
    evil["retrieved"][0]["text"] = f"Consent can be withdrawn at any time. {HOSTILE}"
    evil["retrieved"][1]["chunk_id"] = 'x"><script>alert(1)</script>'
    insert_traces(store, traces)
    result = select_week(review, week, 12, seed="s", now=datetime.now(UTC))
    insert_score(store, evil, "faithfulness_hidden_metric", 0.25)
    return week, traces, result


def item_url(week: str, trace_id: str) -> str:
    from urllib.parse import quote

    return f"/review/weeks/{week}/items/{quote(trace_id, safe='')}"


def label_form(csrf: str, **overrides) -> dict:
    form = {"csrf_token": csrf, "answer_correct": "yes", "grounded": "yes", "citations_supported": "yes",
            "refusal_appropriate": "yes", "expected_behaviour": "answer", "note": "", "relevant": ["policy@c41"]}
    form.update(overrides)
    return form


def test_no_anonymous_access(store, queue, review):
    app, _ = review_app(store)
    client = TestClient(app, follow_redirects=False)
    week, traces, _ = queue
    for url in ("/review/", f"/review/weeks/{week}", item_url(week, traces[0]["trace_id"])):
        r = client.get(url)
        assert r.status_code == 303 and r.headers["location"].startswith("/review/login?next="), url
    r = client.post(f"/review/weeks/{week}/label/{traces[0]['trace_id']}", data=label_form("x"))
    assert r.status_code == 303 and not review.labels_for(traces[0]["trace_id"])
    assert client.get("/review/api/v1/weeks").status_code == 401
    forged = TestClient(app, follow_redirects=False, cookies={"ragmon_review_session": "eyJ1IjoiYWxpY2UifQ.forged"})
    assert forged.get("/review/").status_code == 303


def test_queue_page_shows_progress_per_stratum(store, queue):
    week, traces, result = queue
    app, _ = review_app(store)
    client = signed_in(app)
    page = client.get(f"/review/weeks/{week}")
    assert page.status_code == 200
    for stratum, n in result.selected_by_stratum().items():
        assert re.search(rf'data-stratum="{stratum}">\s*<td>{stratum}</td>\s*<td class="count">0 / {n}</td>', page.text)
    assert client.get("/review/weeks/2026-W01").status_code == 404
    assert client.get("/review/weeks/not-a-week").status_code == 404


def test_hostile_text_is_escaped(store, queue):
    week, traces, _ = queue
    app, _ = review_app(store)
    client = signed_in(app)
    page = client.get(item_url(week, traces[0]["trace_id"]))
    assert page.status_code == 200
    assert "<script>window" not in page.text and "<img src=x" not in page.text and "<script>alert" not in page.text
    assert "&lt;script&gt;window.__pwned=1&lt;/script&gt;" in page.text
    assert "&lt;img src=x onerror=&#34;window.__pwned=2&#34;&gt;" in page.text
    assert 'value="x&#34;&gt;&lt;script&gt;alert(1)&lt;/script&gt;"' in page.text
    assert "script-src 'self'" in page.headers["content-security-policy"]
    # the only script on the page is our own file
    assert re.findall(r"<script[^>]*>", page.text) == ['<script src="/review/static/review.js" defer>']


def test_verdicts_hidden_until_labelled_then_label_stored(store, queue, review):
    week, traces, _ = queue
    trace_id = traces[0]["trace_id"]
    app, telemetry = review_app(store)
    client = signed_in(app)
    before = client.get(item_url(week, trace_id))
    assert "faithfulness_hidden_metric" not in before.text and 'id="verdicts-hidden"' in before.text
    csrf = csrf_of(before.text)
    # without the CSRF token: rejected, nothing stored
    r = client.post(f"/review/weeks/{week}/label/{trace_id}", data=label_form("wrong"))
    assert r.status_code == 403 and not review.labels_for(trace_id)
    r = client.post(f"/review/weeks/{week}/label/{trace_id}", data=label_form(csrf, note="looks <b>fine</b>"))
    assert r.status_code == 303, r.text
    [label] = review.labels_for(trace_id)
    assert (label.reviewer, label.answer_correct, label.note, label.relevant_chunk_ids) == (
        "alice", True, "looks <b>fine</b>", ("policy@c41",))
    after = client.get(item_url(week, trace_id))
    assert "faithfulness_hidden_metric" in after.text and "verdicts-hidden" not in after.text
    assert "looks &lt;b&gt;fine&lt;/b&gt;" in after.text
    metrics = client.get("/metrics").text
    assert re.search(r'ragmon_review_items_reviewed\{stratum="\w+"\} 1\.0', metrics)
    assert sum(float(v) for v in re.findall(r"ragmon_review_items_due\{[^}]*\} (\S+)", metrics)) == 12


def test_bad_label_values_are_rejected(store, queue, review):
    week, traces, _ = queue
    trace_id = traces[1]["trace_id"]
    app, _ = review_app(store)
    client = signed_in(app)
    csrf = csrf_of(client.get(item_url(week, trace_id)).text)
    for bad in ({"answer_correct": "maybe"}, {"expected_behaviour": "dance"}, {"relevant": ["not-retrieved"]},
                {"note": "x" * 10_001}):
        r = client.post(f"/review/weeks/{week}/label/{trace_id}", data=label_form(csrf, **bad))
        assert r.status_code == 400, bad
    assert not review.labels_for(trace_id)
    r = client.post(f"/review/weeks/{week}/label/not-in-queue", data=label_form(csrf))
    assert r.status_code == 404
    form = label_form(csrf)
    del form["grounded"], form["citations_supported"]
    r = client.post(f"/review/weeks/{week}/label/{trace_id}", data=form)
    assert r.status_code == 400 and "Choose an answer for grounded, citations supported: yes, no or unsure" in r.text


def test_a_week_at_the_end_of_the_calendar_is_a_404_not_a_crash(store, queue):
    _, traces, _ = queue
    client = signed_in(review_app(store)[0])
    for url in ("/review/weeks/9999-W52", f"/review/weeks/9999-W52/items/{traces[0]['trace_id']}"):
        assert client.get(url).status_code == 404, url


def test_two_reviewers_disagreement_is_shown_not_resolved(store, queue, review):
    week, traces, _ = queue
    trace_id = traces[2]["trace_id"]
    app, _ = review_app(store)
    alice, bob = signed_in(app, "alice"), signed_in(app, "bob")
    for client, correct in ((alice, "yes"), (bob, "no")):
        csrf = csrf_of(client.get(item_url(week, trace_id)).text)
        r = client.post(f"/review/weeks/{week}/label/{trace_id}", data=label_form(csrf, answer_correct=correct))
        assert r.status_code == 303
    labels = {lab.reviewer: lab.answer_correct for lab in review.labels_for(trace_id)}
    assert labels == {"alice": True, "bob": False}
    page = alice.get(item_url(week, trace_id)).text
    assert 'id="disagreement"' in page and "answer_correct" in page
    assert page.count("<tr") - page.count("<tr><th") >= 2  # both labels listed
    queue_page = alice.get(f"/review/weeks/{week}").text
    assert "reviewers disagree" in queue_page
    assert re.search(r'id="reviewers">Labelled so far:\s*alice 1, bob 1', queue_page)
    # a reviewer who has not labelled yet sees neither label nor disagreement
    app2, _ = review_app(store)
    fresh = signed_in(app2, "bob")
    other = traces[3]["trace_id"]
    csrf = csrf_of(fresh.get(item_url(week, other)).text)
    alice_csrf = csrf_of(alice.get(item_url(week, other)).text)
    alice.post(f"/review/weeks/{week}/label/{other}", data=label_form(alice_csrf))
    hidden = fresh.get(item_url(week, other)).text
    assert 'id="label-table"' not in hidden and csrf


def test_sign_out_needs_csrf_and_ends_the_session_even_for_a_copied_cookie(store, queue):
    app, _ = review_app(store)
    client = signed_in(app)
    copied = client.cookies["ragmon_review_session"]
    other = signed_in(app)  # a second session of the same reviewer stays signed in
    csrf = csrf_of(client.get("/review/").text)
    assert client.post("/review/logout", data={"csrf_token": "nope"}).status_code == 403
    r = client.post("/review/logout", data={"csrf_token": csrf})
    assert r.status_code == 303
    assert client.get("/review/").status_code == 303
    stolen = TestClient(app, follow_redirects=False, cookies={"ragmon_review_session": copied})
    assert stolen.get("/review/").status_code == 303
    assert stolen.get("/review/api/v1/weeks").status_code == 401
    app2, _ = review_app(store)  # another replica (same secret, same store) refuses it too
    assert TestClient(app2, follow_redirects=False, cookies={"ragmon_review_session": copied}).get(
        "/review/").status_code == 303
    assert other.get("/review/").status_code == 200


def test_sign_in_throttles_per_address_and_refuses_huge_credentials_without_hashing(store, queue, monkeypatch):
    from ragmon.review.auth import Authenticator, LoginThrottle

    app, _ = review_app(store, login_max_failures=2)
    checked: list[str] = []
    real = Authenticator.check_password
    monkeypatch.setattr(Authenticator, "check_password",
                        lambda self, u, p: checked.append(u) or real(self, u, p))
    client = TestClient(app, follow_redirects=False)

    def attempt(username: str, password: str = "nope") -> int:
        token = csrf_of(client.get("/review/login").text)
        return client.post("/review/login", data={"username": username, "password": password,
                                                  "csrf_token": token}).status_code

    assert attempt("A" * 1_000_000) == 401 and attempt("alice", "p" * 100_000) == 401
    assert checked == []  # longer than any user name or password can be: refused without an scrypt
    limit = LoginThrottle.AddressFactor * 2
    codes = [attempt(f"user{i}") for i in range(limit)]  # one client, a new user name each time
    assert codes.count(401) == limit - 2 and codes[-1] == 429  # the two huge attempts counted too
    assert attempt("bob", PASSWORDS["bob"]) == 429  # the address is blocked, whatever the user name


def test_a_slow_password_check_runs_off_the_event_loop(store, queue, monkeypatch):
    """On a real server (one event loop): while a password check blocks, /healthz and the pages still answer."""
    import threading

    import httpx

    from ragmon.review.auth import Authenticator
    from ragmon.server import serve

    app, _ = review_app(store)
    release, entered, order = threading.Event(), threading.Event(), []

    def slow_check(self, username, password):
        entered.set()
        release.wait(30)
        order.append("password checked")
        return False

    monkeypatch.setattr(Authenticator, "check_password", slow_check)
    handle = serve(app, "127.0.0.1", 0)
    base = f"http://127.0.0.1:{handle.port}"
    try:
        with httpx.Client(base_url=base, timeout=60) as client:
            token = csrf_of(client.get("/review/login").text)
            signing_in = threading.Thread(target=client.post, args=("/review/login",), kwargs={
                "data": {"username": "alice", "password": "x", "csrf_token": token}})
            signing_in.start()
            assert entered.wait(30)
            # were the check on the event loop, these requests would wait until it returned
            assert httpx.get(f"{base}/healthz", timeout=60).status_code == 200
            assert httpx.get(f"{base}/review/login", timeout=60).status_code == 200
            order.append("pages served")
            release.set()
            signing_in.join(30)
    finally:
        release.set()
        handle.stop()
    assert order == ["pages served", "password checked"]


def test_behind_a_trusted_proxy_sign_in_failures_count_per_forwarded_client(store, queue):
    """A real server trusting the loopback proxy: one client's failures lock out that client, not the reviewer."""
    import httpx

    from ragmon.server import serve

    app, _ = review_app(store, login_max_failures=2)
    handle = serve(app, "127.0.0.1", 0, forwarded_allow_ips="127.0.0.1")
    base = f"http://127.0.0.1:{handle.port}"

    def attempt(client_address: str, password: str) -> int:
        with httpx.Client(base_url=base, timeout=30, headers={"X-Forwarded-For": client_address}) as client:
            token = csrf_of(client.get("/review/login").text)
            return client.post("/review/login", data={"username": "alice", "password": password,
                                                      "csrf_token": token}).status_code

    try:
        assert [attempt("203.0.113.5", "guess") for _ in range(3)] == [401, 401, 429]
        assert attempt("198.51.100.7", PASSWORDS["alice"]) == 303  # the reviewer, from elsewhere, signs in
    finally:
        handle.stop()


def test_without_a_trusted_proxy_x_forwarded_for_cannot_dodge_the_sign_in_limit(store, queue):
    """The default trusts no proxy: a client rotating X-Forwarded-For is still counted under its own address."""
    import httpx

    from ragmon.server import serve

    app, telemetry = review_app(store, login_max_failures=2)
    handle = serve(app, "127.0.0.1", 0)
    base = f"http://127.0.0.1:{handle.port}"

    def attempt(claimed: str) -> int:
        with httpx.Client(base_url=base, timeout=30, headers={"X-Forwarded-For": claimed}) as client:
            token = csrf_of(client.get("/review/login").text)
            return client.post("/review/login", data={"username": "alice", "password": "guess",
                                                      "csrf_token": token}).status_code

    try:
        assert [attempt(f"203.0.113.{i}") for i in range(3)] == [401, 401, 429]
    finally:
        handle.stop()
    failures = telemetry.registry.get_sample_value
    assert failures("ragmon_review_signin_failures_total", {"reason": "bad_credentials"}) == 2
    assert failures("ragmon_review_signin_failures_total", {"reason": "locked_out"}) == 1
