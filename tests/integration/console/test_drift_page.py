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
from ragmon.drift.check.check import DriftChecker
from ragmon.telemetry import Telemetry
from tests.integration.console.support import HOSTILE, console_app
from tests.integration.review.support import signed_in
from tests.integration.test_drift_check import NOW, _insert_traces

THIN = ("thin", "thin-2", "thin-3")
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
    assert html.count('<svg class="plot history"') >= 8 and "<section class=\"dist\">" in html
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


def _cell(row: str, cls: str) -> str:
    return unescape(re.sub(r"<[^>]+>", "", re.search(rf'<td class="[^"]*\b{cls}\b[^"]*">(.*?)</td>', row, re.S)[1]))


def test_statistics_beside_their_thresholds_one_verdict_a_readable_history_and_thin_groups_apart(store):
    """Issue 32: CUSUM with the threshold that pages, one verdict label, the history named name@version and drawn
    readable from a single check, the seasonal reference's own windows, drifted first and too-few apart."""
    rng = np.random.default_rng(7)
    for d in range(1, 8):
        _insert_traces(store, rng, n=300, start=NOW - timedelta(hours=1, days=d), seconds=3600)
        for thin in THIN:
            _insert_traces(store, rng, n=5, start=NOW - timedelta(hours=1, days=d), seconds=3600, stratum=thin)
    _insert_traces(store, rng, n=1000, start=NOW - timedelta(hours=1), seconds=3600, shift=0.1)
    for thin in THIN:
        _insert_traces(store, rng, n=5, start=NOW - timedelta(hours=1), seconds=3600, stratum=thin)
    result = DriftChecker(store, SETTINGS, Telemetry(), clock=lambda: NOW).run_once()
    html = signed_in(console_app(store)).get("/review/console/drift").text

    latest = html.split('id="latest"')[1].split("</table>")[0]
    primary = next(r for r in result.results if r.group.stratum == "billing" and r.feature == "top1_score"
                   and r.cusum_threshold == r.cusum_threshold)
    row = next(m for m in re.findall(r"<tr class=\"[^\"]*\">.*?</tr>", latest, re.S)
               if ">top1_score<" in m and f">{primary.test}<" in m)
    assert _cell(row, "cusum") == f"{primary.cusum:.3f} of {primary.cusum_threshold:.3g}"
    # the row's traces: its group's current window, the highest top-1 scores first (they rose)
    link = unescape(re.search(r'class="traces-link" href="([^"]+)"', row)[1])
    assert "metric=top1_score&order=desc" in link and "stratum=billing" in link
    verdicts = [_cell(r, "verdict") for r in re.findall(r"<tr class=\"drifted\">.*?</tr>", latest, re.S)]
    assert verdicts and all(v in ("DRIFT", "PERSISTENT") for v in verdicts)  # never "DRIFT drift"
    # drifted first, and no test that could not run among the assessed ones; on the unfiltered page the tests
    # that found nothing are folded away
    classes = re.findall(r"<tr class=\"([^\"]*)\">", latest)
    assert classes and set(classes) == {"drifted"} and "thin" not in latest
    quiet_tests = html.split('<details id="quiet-tests">')[1].split("</details>")[0]
    assert 'class="drifted"' not in quiet_tests and quiet_tests.count("<tr class=") >= 1
    apart = html.split('<details id="insufficient">')[1].split("</details>")[0]
    assert "thin" in apart and "insufficient_data" in apart and "billing" not in apart

    # the reference is 7 same-hour windows, not one 7-day span
    dist = html.split('<section class="dist">')[1].split("</section>")[0]
    reference = dist.split('class="meta reference"')[1].split("</p>")[0]
    assert "7 windows at the same time of day" in reference and reference.count('class="window"') == 7
    day_before = primary.windows.current.start - timedelta(days=1)
    assert f"{day_before:%Y-%m-%d %H:%M} – {day_before + timedelta(hours=1):%Y-%m-%d %H:%M}" in reference

    # 16 groups and features: the flagged ones shown, the quiet ones (all of the thin strata's) folded away
    history = html.split('id="history"')[1].split("</table>")[0]
    assert "thin" not in history and history.count("<tr") - 1 == history.count('<tr class="drifted">') >= 1
    quiet = html.split('<details id="history-rest">')[1].split("</details>")[0]
    assert quiet.count(">thin<") == 4 and 'class="drifted"' not in quiet
    billing = next(r for r in re.findall(r"<tr[^>]*>.*?</tr>", history, re.S)
                   if ">billing<" in r and ">top1_score<" in r)
    assert "<td>hybrid@v1</td>" in billing and 'class="drifted"' in billing
    assert f"CUSUM {primary.cusum:.3f} of {primary.cusum_threshold:.3g}" in unescape(billing)
    svg = billing.split("<svg")[1].split("</svg>")[0]
    width, height = (float(x) for x in re.search(r'width="(\d+)" height="(\d+)"', svg).groups())
    (cx, cy), = [(float(a), float(b)) for a, b in re.findall(r'<circle cx="([\d.]+)" cy="([\d.]+)"', svg)]
    assert abs(cx - width / 2) < width / 4 and 8 < cy < height - 16  # one check: a dot inside, not on an edge
    assert 'class="threshold"' in svg
