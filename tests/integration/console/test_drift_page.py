"""The Drift page against checks the real drift checker stored in chDB: the latest check with the drifted group
first, both windows' histograms, the history, an alert's group link (``name@version`` as the alert labels it)
and the link from a drifted row to that group's traces in the current window; a hostile stratum stays text."""

from __future__ import annotations

import re
from datetime import timedelta
from html import unescape
from urllib.parse import quote

import numpy as np

from ragmon.config import DriftSettings
from ragmon.drift.check import DriftChecker
from ragmon.telemetry import Telemetry
from tests.integration.console.support import HOSTILE, console_app
from tests.integration.review.support import signed_in
from tests.integration.test_drift_check import NOW, _insert_traces

SETTINGS = DriftSettings(features=["top1_score", "mean_score", "empty_shortlist_rate", "refusal_rate"])


def test_drift_page_shows_the_latest_check_histograms_history_and_links(store):
    rng = np.random.default_rng(5)
    for stratum in ("billing", HOSTILE):
        for d in range(1, 8):
            _insert_traces(store, rng, n=300, start=NOW - timedelta(hours=1, days=d), seconds=3600, stratum=stratum)
    _insert_traces(store, rng, n=1000, start=NOW - timedelta(hours=1), seconds=3600, stratum="billing", shift=0.1)
    _insert_traces(store, rng, n=1000, start=NOW - timedelta(hours=1), seconds=3600, stratum=HOSTILE)
    DriftChecker(store, SETTINGS, Telemetry(), clock=lambda: NOW - timedelta(minutes=5)).run_once()  # history
    result = DriftChecker(store, SETTINGS, Telemetry(), clock=lambda: NOW).run_once()
    client = signed_in(console_app(store))

    html = client.get("/review/console/drift").text
    assert result.check_id in html
    assert "&lt;script&gt;window.__pwned=1&lt;/script&gt;" in html and "<script>window" not in html
    latest = html.split('id="latest"')[1].split("</table>")[0]
    first = re.search(r"<tr class=\"drifted\">(.*?)</tr>", latest, re.S)[1]
    assert "billing" in first and re.search("PERSISTENT|DRIFT", first)  # drifted rows first
    assert html.count('<svg class="plot spark"') >= 8 and "<section class=\"dist\">" in html
    assert 'role="img">' in html and "reference (n=2100" in html  # both windows' histogram of the drifted feature

    link = unescape(re.search(r'class="traces-link" href="([^"]+)"', latest)[1])
    traces = client.get(link).text
    assert "1,000 traces" in traces  # the group's current window: the 1,000 billing traces of the last hour
    assert "billing" in traces and HOSTILE.replace("<", "&lt;")[:10] not in traces.split('id="traces"')[1]

    # an alert's link: the labels as Prometheus has them
    alert = client.get(f"/review/console/drift?retriever=hybrid%40v1&variant=production&stratum={quote(HOSTILE)}"
                       "&feature=top1_score").text
    rows = alert.split('id="latest"')[1].split("</table>")[0]
    assert rows.count("<tr class=") == 2  # window_mean and its KS companion (whatever tests the feature has)
    assert "top1_score" in rows and "mean_score" not in rows and "billing" not in rows
    assert client.get("/review/console/drift?stratum=" + "x" * 500).status_code == 400
