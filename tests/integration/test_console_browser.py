"""The console in headless Chromium (Debian's package, driven by Playwright with the system executable), served by
uvicorn on loopback against the chDB ``store`` with hostile text in every field: turned away without a session,
then every page after signing in — traces list and a trace, drift, shadow, gate runs, dead letters — where no
injected markup renders or runs; after signing out the console is closed again."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import numpy as np
import pytest

from ragmon.config import ConsoleSettings, DriftSettings, ShadowComparisonSettings, ShadowSettings
from ragmon.drift.check.check import DriftChecker
from ragmon.server import serve
from ragmon.stream.dead_letter_file import FileDeadLetterSink
from ragmon.telemetry import Telemetry
from tests.conftest import make_trace
from tests.integration.console.support import HOSTILE, console_app, console_settings, hostile_trace
from tests.integration.console.test_gate_page import _runs
from tests.integration.console.test_pages import _letters
from tests.integration.console.test_shadow_page import _traffic
from tests.integration.review.support import PASSWORDS, insert_score, insert_traces
from tests.integration.test_drift_check import NOW, _insert_traces
from tests.integration.test_review_browser import ARGS, ARTIFACTS, chromium_path  # noqa: F401 - a fixture

pytestmark = pytest.mark.browser


def _seed(store, tmp_path: Path):
    prod = hostile_trace(make_trace, trace_id=f"t-{HOSTILE}", query_id="q-hostile")
    twin = make_trace(trace_id="t-twin", query_id="q-hostile",
                      retriever={"name": "dense", "version": "v2", "variant": "shadow", "parameters": {}})
    insert_traces(store, [prod, twin])
    insert_score(store, prod, "faithfulness", 0.25, fingerprint=f"fp-{HOSTILE}")
    rng = np.random.default_rng(5)
    for d in range(1, 8):
        _insert_traces(store, rng, n=200, start=NOW - timedelta(hours=1, days=d), seconds=3600, stratum=HOSTILE)
    _insert_traces(store, rng, n=600, start=NOW - timedelta(hours=1), seconds=3600, stratum=HOSTILE, shift=0.15)
    DriftChecker(store, DriftSettings(features=["top1_score", "mean_score"]), Telemetry(), clock=lambda: NOW).run_once()
    _traffic(store)
    letters = tmp_path / "dead.jsonl"
    sink = FileDeadLetterSink(letters)
    sink.send(_letters())
    sink.close()
    return console_settings(
        console=ConsoleSettings(gate_runs_dir=_runs(tmp_path), dead_letter_file=letters),
        shadow=ShadowSettings(comparisons=[ShadowComparisonSettings(baseline="hybrid@v1", candidate="dense@v2",
                                                                    window_seconds=3 * 86_400)]))


def test_every_console_page_in_chromium_with_hostile_content(store, chromium_path, tmp_path):  # noqa: F811
    from playwright.sync_api import expect, sync_playwright

    handle = serve(console_app(store, _seed(store, tmp_path)), "127.0.0.1", 0)
    base = f"http://127.0.0.1:{handle.port}"
    ARTIFACTS.mkdir(exist_ok=True)
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=chromium_path, args=ARGS, headless=True)
            page = browser.new_page(viewport={"width": 1400, "height": 1600})

            def safe() -> None:
                """Nothing injected ran or rendered as markup."""
                assert page.evaluate("window.__pwned") is None
                assert page.locator("main script").count() == 0 and page.locator("main img").count() == 0
                assert page.locator("main svg[onload]").count() == 0

            page.goto(f"{base}/review/console/traces")
            expect(page).to_have_url(f"{base}/review/login?next=%2Freview%2Fconsole%2Ftraces")
            page.goto(f"{base}/console")
            expect(page).to_have_url(f"{base}/review/login?next=%2Freview%2Fconsole%2F")
            page.fill("input[name=username]", "alice")
            page.fill("input[name=password]", PASSWORDS["alice"])
            page.click("button[type=submit]")
            expect(page).to_have_url(f"{base}/review/console/traces")

            # traces: the hostile retriever and stratum are choices of the filter, its trace a row of text
            page.select_option("select[name=stratum]", HOSTILE)
            page.select_option("select[name=retriever]", f"hybrid{HOSTILE}")
            page.click("#filters button[type=submit]")
            expect(page.locator("#traces tbody tr")).to_have_count(1)
            expect(page.locator("#traces")).to_contain_text("<script>window.__pwned=1</script>")
            safe()
            page.screenshot(path=str(ARTIFACTS / "console-traces.png"), full_page=True)
            page.click("#traces tbody tr >> nth=0 >> a")
            expect(page.locator("#question")).to_contain_text('<img src=x onerror="window.__pwned=2">')
            expect(page.locator("#trace-id")).to_contain_text(f"t-{HOSTILE}")
            expect(page.locator("#scores")).to_contain_text("0.250")
            expect(page.locator("#scores")).to_contain_text(f"fp-{HOSTILE}")
            expect(page.locator("#latency")).to_contain_text(HOSTILE)
            safe()
            page.click("#answer a.cite >> nth=0")
            expect(page.locator("#chunk-1 mark")).to_have_text("Consent can be withdrawn at any time")
            page.screenshot(path=str(ARTIFACTS / "console-trace.png"), full_page=True)
            page.click("#related li.twin a")
            expect(page.locator("#trace-id")).to_have_text("t-twin")

            # drift: the hostile group drifted; its histogram is drawn; its row leads to its traces
            page.click("header nav >> text=Drift")
            expect(page.locator("#latest tr.drifted").first).to_contain_text("<script>window.__pwned=1</script>")
            expect(page.locator("section.dist svg").first).to_be_visible()
            safe()
            page.screenshot(path=str(ARTIFACTS / "console-drift.png"), full_page=True)
            page.click("#latest tr.drifted >> nth=0 >> a.traces-link")
            expect(page.locator("#summary")).to_contain_text("600 traces")

            # shadow: verdicts, an interval plot, a loss leading to both traces of its query
            page.click("header nav >> text=Shadow")
            expect(page.locator("table.verdicts").first).to_be_visible()
            expect(page.locator("svg.plot.ci").first).to_be_visible()
            safe()
            page.screenshot(path=str(ARTIFACTS / "console-shadow.png"), full_page=True)
            page.click("table.losses a.pair-link >> nth=0")
            expect(page.locator("#traces tbody tr")).to_have_count(2)

            # gate runs: two runs, one opened, the two compared
            page.click("header nav >> text=Gate runs")
            expect(page.locator("#runs tbody tr")).to_have_count(2)
            page.click("#compare-form button")
            expect(page.locator("#comparison")).to_be_visible()
            page.click("#runs tbody tr >> nth=0 >> a")
            expect(page.locator("#strata")).to_contain_text("<script>window.__pwned=1</script>")
            safe()

            # dead letters: counts by reason, a letter opened: its bytes as escaped text and hex
            page.click("header nav >> text=Dead letters")
            expect(page.locator("#reasons")).to_contain_text("json")
            page.click("#letters details.letter >> nth=0 >> summary")
            expect(page.locator("#letters details.letter >> nth=0 >> pre.hex")).to_be_visible()
            expect(page.locator("#letters")).to_contain_text("<script>window.__pwned=1</script>")
            expect(page.locator("pre.replay").nth(1)).to_contain_text("ragmon ingest --file -")
            safe()
            page.screenshot(path=str(ARTIFACTS / "console-dead-letters.png"), full_page=True)

            page.click("header form.logout button")
            page.goto(f"{base}/review/console/drift")
            expect(page).to_have_url(f"{base}/review/login?next=%2Freview%2Fconsole%2Fdrift")
            browser.close()
    finally:
        handle.stop()
