"""The review UI in headless Chromium (Debian's package, driven by Playwright with the system executable), served
in-process by uvicorn on loopback against the chDB ``store``: sign in, open the queue, label an item with the
keyboard, see the judge's verdicts revealed and the label stored; hostile document text stays text."""

from __future__ import annotations

import shutil
from datetime import UTC, datetime
from pathlib import Path

import pytest

from ragmon.review.queries import ClickHouseReviewQueries
from ragmon.review.role import ReviewRole
from ragmon.review.selection import select_week
from ragmon.server import Health, create_app, serve
from ragmon.telemetry import Telemetry
from tests.integration.review.support import (
    PASSWORDS,
    insert_score,
    insert_traces,
    review_settings,
    week_traces,
)
from tests.integration.review.test_web import HOSTILE
from tests.support.missing import missing

pytestmark = pytest.mark.browser
CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"


@pytest.fixture
def review(store) -> ClickHouseReviewQueries:
    return ClickHouseReviewQueries(store)


@pytest.fixture
def chromium_path() -> str:
    if not shutil.which(CHROMIUM):
        missing(f"{CHROMIUM} is missing: scripts/setup-system installs Debian's chromium")
    return CHROMIUM


def test_sign_in_label_with_keyboard_and_see_verdicts(store, chromium_path, review):
    from playwright.sync_api import expect, sync_playwright

    week, traces = week_traces(5, ["billing", "consent"], seed=31)
    for t in traces:
        t["retrieved"][2]["text"] = f"Office hours. {HOSTILE}"
        t["question"] = f"Can I withdraw consent? {HOSTILE}"
    insert_traces(store, traces)
    result = select_week(review, week, 5, seed="browser", now=datetime.now(UTC))
    first = next(t for t in traces if t["trace_id"] == result.items[0].trace_id)
    insert_score(store, first, "answer_relevance", 0.83)
    insert_score(store, first, "faithfulness", 0.5)

    telemetry = Telemetry()
    role = ReviewRole(review_settings(), store, telemetry)
    handle = serve(create_app(telemetry, Health(), routers=[role.router]), "127.0.0.1", 0)
    base = f"http://127.0.0.1:{handle.port}"
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=chromium_path, args=ARGS, headless=True)
            page = browser.new_page(viewport={"width": 1280, "height": 1600})
            page.goto(f"{base}/review/")
            expect(page).to_have_url(f"{base}/review/login?next=%2Freview%2F")
            page.fill("input[name=username]", "alice")
            page.fill("input[name=password]", PASSWORDS["alice"])
            page.click("button[type=submit]")
            page.click(f"a[href='/review/weeks/{week}']")
            expect(page.locator("#progress")).to_contain_text("0 / ")
            page.click("#queue li >> nth=0 >> a")
            expect(page.locator("#question")).to_contain_text("Can I withdraw consent?")
            # hostile text renders as text and never runs
            expect(page.locator("#question")).to_contain_text("<script>window.__pwned=1</script>")
            expect(page.locator("#chunk-3 .chunk-text")).to_contain_text('<img src=x onerror="window.__pwned=2">')
            assert page.evaluate("window.__pwned") is None
            assert page.locator("main img").count() == 0 and page.locator("main script").count() == 0
            # the citation links to the cited chunk, whose quoted span is highlighted
            page.click("#answer a.cite >> nth=0")
            expect(page).to_have_url(f"{page.url.split('#')[0]}#chunk-1")
            expect(page.locator("#chunk-1 mark")).to_have_text("Consent can be withdrawn at any time")
            outline = "e => getComputedStyle(e).outlineStyle"
            assert page.eval_on_selector("#chunk-1 .chunk-text", outline) == "solid"  # the cited chunk stands out
            assert page.eval_on_selector("#chunk-2 .chunk-text", outline) == "none"
            # verdicts stay hidden until the label is in
            expect(page.locator("#verdicts-hidden")).to_be_visible()
            assert page.locator("#verdict-table").count() == 0
            page.locator("body").click(position={"x": 5, "y": 5})
            page.keyboard.press("y")  # all yes
            page.keyboard.press("a")  # answer correct: yes → no
            page.keyboard.press("x")  # add to golden set
            page.keyboard.press("Enter")  # submit
            expect(page.locator("#verdict-table")).to_be_visible()
            expect(page.locator("#verdict-table")).to_contain_text("answer_relevance")
            expect(page.locator("#verdict-table")).to_contain_text("0.830")
            expect(page.locator("#label-table")).to_contain_text("alice")
            ARTIFACTS.mkdir(exist_ok=True)
            shot = ARTIFACTS / "review-item-labelled.png"
            page.screenshot(path=str(shot), full_page=True)
            print(f"\nscreenshot: {shot}")
            page.goto(f"{base}/review/weeks/{week}")
            expect(page.locator("#progress")).to_contain_text("1 / ")
            page.screenshot(path=str(ARTIFACTS / "review-queue.png"), full_page=True)
            browser.close()
    finally:
        handle.stop()
    [label] = review.labels_for(first["trace_id"])
    assert (label.reviewer, label.answer_correct, label.grounded, label.citations_supported, label.add_to_golden) == (
        "alice", False, True, True, True)
    assert label.relevant_chunk_ids == ("policy@c41",)  # the cited chunk, ticked by default
