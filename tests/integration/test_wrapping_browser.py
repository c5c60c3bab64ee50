"""Long unbroken producer text in headless Chromium (Debian's package via Playwright): a trace whose question,
answer, chunk text, quote, feedback comment and attributes are each KBs without a space (ids and names as long as
the schema allows). Every page that shows it — the review item, the triage item, both queues, the console's trace
list and trace page, a dead letter — must stay as wide as the viewport (issue 32: a 60 KB chunk made the review
and triage item pages 640,858 px wide); the text wraps, or scrolls inside its own box."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from ragmon.config import ConsoleSettings
from ragmon.review.queries import ClickHouseReviewQueries
from ragmon.review.selection import select_week
from ragmon.review.triage import select_triage
from ragmon.server import serve
from ragmon.stream.dead_letter import DeadLetter
from ragmon.stream.dead_letter_file import FileDeadLetterSink
from tests.integration.console.support import console_app, console_settings
from tests.integration.review.support import PASSWORDS, insert_score, insert_traces, week_traces
from tests.integration.test_review_browser import ARGS, ARTIFACTS, chromium_path  # noqa: F401 - a fixture

pytestmark = pytest.mark.browser
WIDTH = 1280


def _long(tag: str, n: int = 60_000) -> str:
    return f"{tag}-" + "x" * n


def _traces() -> tuple[str, list[dict]]:
    week, traces = week_traces(3, ["billing"], seed=53)
    for t in traces:
        t["question"] = _long("question")
        t["answer"] = f"Consent can be withdrawn at any time. {_long('answer', 20_000)}"
        t["citations"] = [{"sentence": 0, "chunk_id": "policy@c41", "quote": "Consent can be withdrawn at any time"},
                          {"sentence": 1, "chunk_id": _long("cited", 240), "quote": _long("quote", 5_000)}]
        for c in t["retrieved"]:
            c["text"] = f"{c['text']} {_long('chunk')}"
        t["retrieved"][2]["chunk_id"] = _long("faq@c", 240)
        t["retrieved"][2]["doc_id"] = _long("doc", 240)
        t["category"] = "billing"
        t["model"] = {"name": _long("model", 240), "version": "v1"}
        t["attributes"] = {"note": _long("attr", 9_000)}
        t["feedback"] = {"rating": -1, "comment": _long("comment", 9_000)}
    return week, traces


def test_long_unbroken_text_never_widens_a_page(store, chromium_path, tmp_path):  # noqa: F811 - the fixture
    from playwright.sync_api import sync_playwright

    week, traces = _traces()
    insert_traces(store, traces)
    insert_score(store, traces[0], "faithfulness", 0.5, fingerprint=_long("fp", 240))
    select_week(ClickHouseReviewQueries(store), week, 3, seed="wrap", now=datetime.now(UTC))
    select_triage(store, week, seed="wrap", now=datetime.now(UTC))
    letters = tmp_path / "dead.jsonl"
    sink = FileDeadLetterSink(letters)
    sink.send([DeadLetter("rag.traces", 0, 1, _long("value").encode(), _long("reason", 2_000),
                          _long("detail", 5_000))])
    sink.close()
    app = console_app(store, console_settings(console=ConsoleSettings(dead_letter_file=letters)))
    handle = serve(app, "127.0.0.1", 0)
    base = f"http://127.0.0.1:{handle.port}"
    trace_id = traces[0]["trace_id"]
    pages = {
        "review item": f"/review/weeks/{week}/items/{trace_id}",
        "review queue": f"/review/weeks/{week}",
        "triage item": f"/review/triage/{week}/items/{trace_id}",
        "triage queue": f"/review/triage/{week}",
        "console traces": "/review/console/traces?since=30d",
        "console trace": f"/review/console/traces/{trace_id}",
        "console dead letters": "/review/console/dead-letters",
    }
    widths = {}
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=chromium_path, args=ARGS, headless=True)
            page = browser.new_page(viewport={"width": WIDTH, "height": 1000})
            page.goto(f"{base}/review/login")
            page.fill("input[name=username]", "alice")
            page.fill("input[name=password]", PASSWORDS["alice"])
            page.click("button[type=submit]")
            for name, path in pages.items():
                page.goto(f"{base}{path}")
                assert page.locator("main").count() == 1, name
                for details in page.locator("details").all():  # a dead letter opened, as on-call opens it
                    details.evaluate("d => d.open = true")
                widths[name] = page.evaluate("document.documentElement.scrollWidth")
            ARTIFACTS.mkdir(exist_ok=True)
            page.goto(f"{base}{pages['review item']}")
            page.screenshot(path=str(ARTIFACTS / "review-item-long-text.png"))
            browser.close()
    finally:
        handle.stop()
    assert widths == dict.fromkeys(pages, WIDTH)
