"""The incident page (issue 32, item 1), served by the console against the real chDB store: what fired and since
when against the threshold that pages, the CUSUM path, what changed with the true cause first and its segment one
click from its traces (lowest score first), the runbook's commands filled in for the group and time — and the
hostile segment value a producer sent stays text. Then in Chromium: from the alert's dashboard_url to the page."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from html import unescape
from urllib.parse import urlencode

import httpx
import numpy as np
import pytest

from ragmon.config import DriftSettings
from ragmon.console.incident_page import ExplanationCache
from ragmon.drift.check.applied import applied_settings
from ragmon.drift.check.check import DriftChecker
from ragmon.drift.check.window_queries import Group
from ragmon.drift.explain.explain_run import run_explain
from ragmon.drift.simulation.incidents import Incident, Traffic, insert
from ragmon.server import serve
from ragmon.telemetry import Telemetry
from tests.integration.console.support import HOSTILE, console_app
from tests.integration.review.support import PASSWORDS, csrf_of
from tests.integration.test_review_browser import ARGS, chromium_path  # noqa: F401 - a fixture

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
GROUP = {"retriever": "hybrid@v1", "variant": "production", "stratum": "billing", "feature": "top1_score"}


def _seed(store) -> None:
    """A week of the same hour, then a stale index version (named by hostile text) in the current hour; two checks."""
    traffic = Traffic(np.random.default_rng(3))
    for day in range(7, -1, -1):
        cols = traffic.window(400, NOW - timedelta(hours=1, days=day), 3600,
                              Incident("stale_index", 0.4, 0.15) if day == 0 else None)
        cols["index_version"] = [HOSTILE if v == "idx-2026-09-14" else v for v in cols["index_version"]]
        insert(store, cols, retriever="hybrid@v1", variant="production", stratum="billing", run_id=f"d{day}")
    settings = DriftSettings(features=["top1_score"])
    for at in (NOW - timedelta(hours=2), NOW):
        DriftChecker(store, settings, Telemetry(), clock=lambda at=at: at).run_once()


def _signed_in(base: str) -> httpx.Client:
    client = httpx.Client(base_url=base, follow_redirects=False)
    login = client.get("/review/login")
    client.post("/review/login", data={"username": "alice", "password": PASSWORDS["alice"],
                                       "csrf_token": csrf_of(login.text), "next": "/review/console/"})
    return client


def test_the_incident_page_says_what_fired_and_what_changed(store) -> None:
    _seed(store)
    handle = serve(console_app(store), "127.0.0.1", 0)
    try:
        client = _signed_in(f"http://127.0.0.1:{handle.port}")
        try:
            page = client.get("/review/console/incident?" + urlencode(GROUP))
            assert page.status_code == 200, page.text[:500]
            html = page.text
            assert "against the threshold that pages" in html and 'id="cusum-plot"' in html and "pages at" in html
            first = html.split('class="dimension"')[1]
            assert 'data-dimension="index_version"' in first
            assert HOSTILE not in html and "&lt;script&gt;window.__pwned=1&lt;/script&gt;" in first
            assert "ragmon drift explain --group hybrid@v1/production/billing --feature top1_score --at " \
                   "2026-12-01T12:00:00.000Z" in html
            assert "RagmonRetrievalScoreDrift" in html
            link = first.split('class="segment-link" href="')[1].split('"')[0].replace("&amp;", "&")
            traces = client.get(link)
            assert traces.status_code == 200
            values = [float(v) for v in traces.text.split('id="segment-traces"')[1].split('<td class="num">')[1:]
                      for v in [v.split("<")[0]]]
            assert len(values) == 50 and values == sorted(values)  # the worst first
            assert HOSTILE not in traces.text
            # each trace links with its time, so its page reads that day's partitions, not the whole table
            links = re.findall(r'href="(/review/console/traces/[^"]+)"', traces.text)
            assert len(links) == 50 and all("?at=" in x for x in links)
            # and opens: the simulator's rows carry fewer texts than chunks, which a page read as absent, not a 500
            opened = client.get(unescape(links[0]))
            assert opened.status_code == 200, opened.text[-2000:]
            bad = client.get("/review/console/incident/traces?" + urlencode({**GROUP, "dimension": "nope",
                                                                           "segment": "x"}))
            assert bad.status_code == 400
            assert client.get("/review/console/incident?" + urlencode({**GROUP, "feature": "x"})).status_code == 400
        finally:
            client.close()
    finally:
        handle.stop()


@pytest.mark.browser
def test_the_explanation_of_a_stored_check_is_computed_once_per_check(store) -> None:
    """The incident page explains the latest stored check once and shows that until the next check is stored (as
    the Shadow page its comparison): traces stored meanwhile in its window change the next check's explanation."""
    _seed(store)
    group, feature = Group("hybrid", "v1", "production", "billing"), "top1_score"
    drift = applied_settings(store, DriftSettings()).settings
    cache = ExplanationCache()
    first = cache.explain(store, drift, group, feature, NOW)
    assert first.checked_at == NOW and first.explanation.n_current > 0
    late = Traffic(np.random.default_rng(4)).window(100, NOW - timedelta(minutes=30), 600, None)
    insert(store, late, retriever="hybrid@v1", variant="production", stratum="billing", run_id="late")
    assert cache.explain(store, drift, group, feature, NOW) is first
    fresh = run_explain(store, drift, group, feature, None, now=NOW, draws=200)
    assert fresh.explanation.n_current > first.explanation.n_current  # the store did change
    later = NOW + timedelta(hours=1)
    DriftChecker(store, DriftSettings(features=["top1_score"]), Telemetry(), clock=lambda: later).run_once()
    next_check = cache.explain(store, drift, group, feature, later)
    assert next_check is not first and next_check.checked_at == later


def test_from_the_alerts_dashboard_url_to_the_top_cause_in_chromium(store, chromium_path) -> None:  # noqa: F811
    from playwright.sync_api import expect, sync_playwright

    _seed(store)
    handle = serve(console_app(store), "127.0.0.1", 0)
    base = f"http://127.0.0.1:{handle.port}"
    # what RagmonRetrievalScoreDrift's dashboard_url renders to for this group (alerts/tests/drift.test.yaml)
    dashboard_url = f"{base}/review/console/incident?" + urlencode(GROUP)
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=chromium_path, args=ARGS, headless=True)
            page = browser.new_page(viewport={"width": 1400, "height": 1600})
            page.goto(dashboard_url)
            page.fill("input[name=username]", "alice")
            page.fill("input[name=password]", PASSWORDS["alice"])
            page.click("button[type=submit]")
            expect(page.locator("h1")).to_contain_text("Incident: top1_score")
            top = page.locator("tr.dimension").first
            expect(top).to_have_attribute("data-dimension", "index_version")
            expect(top.locator("a.segment-link")).to_have_text(HOSTILE.strip())
            expect(page.locator("#threshold")).to_contain_text("against the threshold that pages")
            assert page.evaluate("window.__pwned") is None
            top.locator("a.segment-link").click()
            expect(page.locator("#segment")).to_have_text(HOSTILE.strip())
            assert page.locator("#segment-traces tbody tr").count() == 50
            assert page.evaluate("window.__pwned") is None
            browser.close()
    finally:
        handle.stop()
