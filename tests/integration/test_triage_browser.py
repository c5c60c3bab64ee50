"""The triage queue in headless Chromium (Debian's package via Playwright), served in-process against chDB: sign in,
open the week's triage queue, give a thumbs-down trace its cause, land on the next untriaged item, and see the
queue's progress; the user's hostile comment stays text."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from ragmon.review.role import ReviewRole
from ragmon.review.triage import load_triage, select_triage
from ragmon.server import Health, create_app, serve
from ragmon.telemetry import Telemetry
from tests.integration.review.support import PASSWORDS, insert_traces, review_settings, week_traces
from tests.integration.test_review_browser import ARGS, ARTIFACTS, chromium_path  # noqa: F401 - fixture

pytestmark = pytest.mark.browser
HOSTILE_COMMENT = '<img src=x onerror="window.__pwned=3"> this is wrong'


def test_triage_a_thumbs_down_in_the_browser(store, chromium_path):  # noqa: F811 - the fixture
    from playwright.sync_api import expect, sync_playwright

    week, traces = week_traces(6, ["billing", "consent"], seed=41)
    for t in traces:
        t["feedback"] = {"rating": -1, "comment": HOSTILE_COMMENT}
    insert_traces(store, traces)
    queued = select_triage(store, week, seed="browser", now=datetime.now(UTC))
    first, second = queued.items[0].trace_id, queued.items[1].trace_id

    telemetry = Telemetry()
    role = ReviewRole(review_settings(), store, telemetry)
    handle = serve(create_app(telemetry, Health(), routers=[role.router]), "127.0.0.1", 0)
    base = f"http://127.0.0.1:{handle.port}"
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=chromium_path, args=ARGS, headless=True)
            page = browser.new_page(viewport={"width": 1280, "height": 1400})
            page.goto(f"{base}/review/triage/")
            page.fill("input[name=username]", "alice")
            page.fill("input[name=password]", PASSWORDS["alice"])
            page.click("button[type=submit]")
            expect(page).to_have_url(f"{base}/review/triage/")
            page.click(f"a[href='/review/triage/{week}']")
            expect(page.locator("#triage-progress")).to_contain_text("0 of 6 triaged")
            page.click("#triage-queue li >> nth=0 >> a")
            expect(page.locator("#feedback-comment")).to_contain_text('<img src=x onerror="window.__pwned=3">')
            assert page.evaluate("window.__pwned") is None and page.locator("main img").count() == 0
            page.check("input[name=cause][value=unsupported_claim]")
            page.click("#save-cause")
            expect(page).to_have_url(f"{base}/review/triage/{week}/items/{second}")  # the next untriaged item
            page.goto(f"{base}/review/triage/{week}")
            expect(page.locator("#triage-progress")).to_contain_text("1 of 6 triaged")
            expect(page.locator("#triage-queue li.done .cause")).to_have_text("unsupported_claim")
            ARTIFACTS.mkdir(exist_ok=True)
            page.screenshot(path=str(ARTIFACTS / "triage-queue.png"), full_page=True)
            browser.close()
    finally:
        handle.stop()
    labelled = {i.trace_id: (i.cause, i.reviewer) for i in load_triage(store, week).items if i.cause}
    assert labelled == {first: ("unsupported_claim", "alice")}
