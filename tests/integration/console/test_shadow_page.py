"""The Shadow page on generated production/shadow traffic in chDB with a known difference (the candidate loses on
'billing', wins on 'consent') and hostile questions: a verdict per stratum, interval plots of the judged deltas,
wins and losses linking to both traces of the query, a comparison asked for on the page, bad asks refused."""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime, timedelta
from html import unescape

from ragmon.config import ShadowComparisonSettings, ShadowSettings
from ragmon.demo.traffic import RetrieverProfile, generate_traces, relevance_of
from ragmon.metrics.retrieval import recall_at_k
from tests.integration.console.support import console_app, console_settings
from tests.integration.review.support import signed_in
from tests.integration.shadow.support import insert_scores, insert_traces

N, SEED = 600, 11
CANDIDATE = RetrieverProfile(name="dense", version="v2", stratum_noise={"billing": 1.4, "consent": 0.12})


def _traffic(store) -> None:
    docs = generate_traces(N, seed=SEED, candidate=CANDIDATE, coverage=0.9, hostile_every=1)
    insert_traces(store, docs)
    rel = relevance_of(N, seed=SEED)
    insert_scores(store, [(d, "context_recall", recall_at_k([r["chunk_id"] for r in d["retrieved"]],
                                                            rel[d["query_id"]], 5) or 0.0, "fp-A")
                          for d in docs if d["query_id"] in rel])


def test_configured_comparison_verdicts_intervals_and_trace_pairs(store):
    _traffic(store)
    comparison = ShadowComparisonSettings(baseline="hybrid@v1", candidate="dense@v2", window_seconds=3 * 86_400)
    client = signed_in(console_app(store, console_settings(shadow=ShadowSettings(comparisons=[comparison]))))
    html = client.get("/review/console/shadow").text
    assert "<img src" not in html and "&lt;img src=x onerror=&#34;alert(1)&#34;&gt;" in html
    verdicts = html.split('class="list verdicts"')[1].split("</table>")[0]
    billing = re.search(r"<tr><td>billing</td>.*?</tr>", verdicts, re.S)[0]
    # no thresholds configured: the verdict says which to set, whatever it decides
    assert re.search(r'class="verdict-(promote|hold|reject)"', billing) and "--max-quality-drop" in billing
    assert re.search(r"<tr><td>all</td>", verdicts)
    assert 'class="plot ci"' in html and "context_recall (judge, judge fp-A)" in html
    plot = html.split('class="plot ci"')[1].split("</svg>")[0]
    assert plot.count("<circle") >= 3 and "#c53030" in plot and "#2f855a" in plot  # a loss and a win, both clear
    link = unescape(re.search(r'class="pair-link" href="([^"]+)"', html.split('class="list losses"')[1])[1])
    pair = client.get(link).text
    variants = re.findall(r"<td>(production|shadow)</td>", pair.split('id="traces"')[1])
    assert sorted(variants) == ["production", "shadow"]


def test_comparison_asked_on_the_page_and_bad_asks(store):
    _traffic(store)
    client = signed_in(console_app(store))
    html = client.get("/review/console/shadow?baseline=hybrid&candidate=dense&since=3d").text
    assert "hybrid (production) vs dense (shadow)" in html and "verdict-" in html
    nothing = client.get("/review/console/shadow?baseline=hybrid&candidate=nobody&since=3d").text
    assert "0 candidate traces" in nothing and 'class="notice shadow-notice"' in nothing
    assert "<b>" not in client.get("/review/console/shadow?baseline=%3Cb%3E&candidate=dense").text
    for bad in ("candidate=dense", "baseline=hybrid&candidate=hybrid&candidate_variant=production",
                "baseline=hybrid&candidate=dense&since=never", "baseline=hybrid&candidate=dense&baseline_variant=x"):
        r = client.get(f"/review/console/shadow?{bad}")
        assert r.status_code == 400, bad
        assert "<b>" not in r.text


def _counts(html: str) -> tuple[int, int]:
    m = re.search(r"([\d,]+) baseline and ([\d,]+) candidate traces", html)
    return int(m[1].replace(",", "")), int(m[2].replace(",", ""))


def test_the_stored_shadow_pair_is_compared_without_asking_once_per_check(store):
    """Issue 32: with nothing configured the page said "No shadow comparison is configured" although the store
    held the demo's shadow pair, and a comparison asked for was recomputed (2,000 resamples) on every view."""
    empty = signed_in(console_app(store)).get("/review/console/shadow").text
    assert "No shadow comparison is configured" in empty  # and no shadow traffic stored either
    _traffic(store)
    now = [time.time() + 10]  # checks every 5 s: the next one is after every generated trace
    client = signed_in(console_app(store, console_settings(shadow=ShadowSettings(interval_seconds=5)),
                                   clock=lambda: now[0]))
    html = client.get("/review/console/shadow").text
    assert "hybrid@v1 (production) vs dense@v2 (shadow)" in html and 'class="meta derived"' in html
    assert re.search(r'class="verdict-(promote|hold|reject)"', html) and 'class="plot ci"' in html
    first = _counts(html)
    assert first[0] == N

    # traffic stored since: the same check's views show the comparison computed once for it
    insert_traces(store, generate_traces(50, seed=SEED + 1, candidate=CANDIDATE,
                                         start=datetime.now(UTC) - timedelta(seconds=120)))
    assert _counts(client.get("/review/console/shadow").text) == first
    assert _counts(client.get("/review/console/shadow?baseline=hybrid@v1&candidate=dense@v2&since=23h")
                   .text)[0] == N + 50
    now[0] += 5  # the next check computes it again, once
    assert _counts(client.get("/review/console/shadow").text)[0] == N + 50


def test_the_daemon_computes_each_checks_comparison_before_the_first_view(store):
    """On 10 M traces the first view after each shadow check waited 5–27 s for the comparison; the console's
    warm-up loop in the daemon (``ragmon review``/``ragmon run``) computes it as the check begins, and the page
    shows that result: traffic stored after the loop ran is not in it until the next check."""
    from ragmon.process import build_process
    from ragmon.server import create_app

    day = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)  # checks daily: one at midnight
    insert_traces(store, generate_traces(N, seed=SEED, candidate=CANDIDATE, coverage=0.9,
                                         start=day - timedelta(hours=6)))
    process = build_process(console_settings(shadow=ShadowSettings(interval_seconds=86_400)), ["review"],
                            store=store)
    loop = next(loop for loop in process.parts["review"].loops if loop.name == "console-shadow-warm")
    assert loop.interval_seconds == 15.0  # looks for a new check every 15 s (at most the check interval)
    loop.fn()  # what the loop's thread does
    insert_traces(store, generate_traces(50, seed=SEED + 1, candidate=CANDIDATE, start=day - timedelta(hours=5)))
    client = signed_in(create_app(process.telemetry, process.health, process.routers))
    html = client.get("/review/console/shadow").text
    assert "hybrid@v1 (production) vs dense@v2 (shadow)" in html and 'class="meta derived"' in html
    assert _counts(html)[0] == N  # computed by the loop, before the 50 were stored
    asked = client.get("/review/console/shadow?baseline=hybrid@v1&candidate=dense@v2&since=2d").text
    assert _counts(asked)[0] == N + 50  # an ask is computed when asked


def test_a_comparison_that_fails_is_not_kept_for_the_check(store):
    """A comparison that could not be made (here: no pairs yet — the shadow deployment had not sent any) is tried
    again at the next view of the same check, not shown as empty until the next check (a day here)."""
    comparison = ShadowComparisonSettings(baseline="hybrid@v1", candidate="dense@v2", window_seconds=3 * 86_400)
    now = [time.time() + 10]
    client = signed_in(console_app(store, console_settings(shadow=ShadowSettings(comparisons=[comparison],
                                                                                  interval_seconds=86_400)),
                                   clock=lambda: now[0]))
    assert "0 candidate traces" in client.get("/review/console/shadow").text
    day = datetime.fromtimestamp(now[0], UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    insert_traces(store, generate_traces(N, seed=SEED, candidate=CANDIDATE, coverage=0.9,
                                         start=day - timedelta(hours=6)))
    assert _counts(client.get("/review/console/shadow").text)[0] == N
