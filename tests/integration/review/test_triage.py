"""Negative-feedback triage against the real chDB engine: the week's thumbs-down traces (all, or a capped seeded
sample) in their own queue, one cause per trace through the review pages, the weekly report with its trend, and
the random review sample unchanged by feedback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from ragmon.errors import InputError
from ragmon.review.queries import ClickHouseReviewQueries
from ragmon.review.records import iso_week, parse_week
from ragmon.review.selection import sample_week
from ragmon.review.triage import CAUSES, load_triage, save_triage_label, select_triage
from ragmon.review.triage_report import report_weeks, triage_report
from ragmon.store import ClickHouseStore
from tests.integration.review.support import csrf_of, insert_traces, review_app, signed_in, week_traces

NOW = datetime.now(UTC)


def thumbs(traces: list[dict[str, Any]], every: int) -> list[dict[str, Any]]:
    """Every ``every``-th trace gets a thumbs-down with a comment (some hostile), the others a thumbs-up or none."""
    out = []
    for i, t in enumerate(traces):
        if i % every == 0:
            comment = '<script>alert("x")</script> wrong answer' if i % (every * 2) == 0 else "wrong answer"
            out.append({**t, "feedback": {"rating": -1, "comment": comment}})
        else:
            out.append({**t, "feedback": {"rating": 1} if i % 2 else None})
    return out


def test_the_weeks_thumbs_down_are_queued_capped_and_selecting_again_changes_nothing(store: ClickHouseStore) -> None:
    week, traces = week_traces(120, ["billing", "consent"], seed=3)
    traces = thumbs(traces, 4)  # 30 thumbs-down
    traces.append({**traces[0], "trace_id": "shadow-down", "retriever": {"name": "hybrid", "variant": "shadow"}})
    insert_traces(store, traces)
    down = {t["trace_id"] for t in traces if (t.get("feedback") or {}).get("rating") == -1
            and t["retriever"].get("variant", "production") == "production"}  # fmt: skip
    everything = select_triage(store, week, max_items=500, seed="s1", now=NOW)
    assert {i.trace_id for i in everything.items} == down and everything.population == 30
    other_week = report_weeks(week, 2)[0]
    capped = select_triage(store, other_week, max_items=5, seed="s1", now=NOW)
    assert capped.items == () and capped.population == 0  # no traffic that week: nothing queued
    again = select_triage(store, week, max_items=3, seed="other", now=NOW)
    assert again.already_selected and {i.trace_id for i in again.items} == down and again.seed == "s1"


def test_negative_feedback_outcome_events_count_as_thumbs_down(store: ClickHouseStore) -> None:
    """An app that sends feedback later, as outcome events (schemas/outcome.v1), gets it triaged too."""
    week, traces = week_traces(20, ["billing"], seed=9)
    traces[0] = {**traces[0], "feedback": {"rating": -1}}  # rated on the trace itself
    insert_traces(store, traces)
    start, end = parse_week(week)
    events = [(traces[1], -1.0, start + timedelta(hours=1)), (traces[2], -1.0, end + timedelta(hours=3)),  # late
              (traces[3], 1.0, start + timedelta(hours=1)),      # a thumbs-up is not a complaint
              (traces[4], -1.0, end + timedelta(days=3))]        # beyond the day after the week: not counted
    store.insert_rows("outcomes", [[f"e{i}", t["query_id"], "feedback", at, value, at, "test"]
                                   for i, (t, value, at) in enumerate(events)],
                      ["event_id", "query_id", "kind", "time", "value", "received_at", "source"])
    queued = select_triage(store, week, seed="fb", now=NOW)
    assert {i.trace_id for i in queued.items} == {t["trace_id"] for t in traces[:3]} and queued.population == 3


def test_a_capped_sample_is_a_seeded_random_subset(store: ClickHouseStore) -> None:
    week, traces = week_traces(200, ["billing"], seed=4)
    insert_traces(store, thumbs(traces, 2))  # 100 thumbs-down
    sample = select_triage(store, week, max_items=10, seed="fixed", now=NOW)
    assert len(sample.items) == 10 and sample.population == 100
    assert [i.trace_id for i in load_triage(store, week).items] == [i.trace_id for i in sample.items]


def test_the_random_review_sample_is_blind_to_feedback(store: ClickHouseStore,
                                                       store_settings: Any) -> None:  # fmt: skip
    week, traces = week_traces(150, ["billing", "consent"], seed=5)
    insert_traces(store, traces)
    before = sample_week(ClickHouseReviewQueries(store), week, 20, seed="blind")
    insert_traces(store, thumbs(traces, 3))  # the same traces, now with feedback (newer versions)
    select_triage(store, week, seed="t", now=NOW)
    after = sample_week(ClickHouseReviewQueries(store), week, 20, seed="blind")
    assert [i.trace_id for i in after.items] == [i.trace_id for i in before.items]


def test_labels_through_the_pages_and_the_report_with_its_trend(store: ClickHouseStore) -> None:
    week, traces = week_traces(60, ["billing", "consent"], seed=6)
    traces = thumbs(traces, 3)  # 20 thumbs-down
    insert_traces(store, traces)
    earlier = report_weeks(week, 2)[0]
    start, _ = parse_week(earlier)
    old = [{**t, "trace_id": f"old-{i}", "timestamp": (start + timedelta(hours=i + 1)).isoformat()}
           for i, t in enumerate(traces) if (t.get("feedback") or {}).get("rating") == -1][:10]
    insert_traces(store, old)
    prior = select_triage(store, earlier, seed="p", now=NOW)
    for i, item in enumerate(prior.items):  # the earlier week: mostly retrieval misses
        save_triage_label(store, earlier, item.trace_id, "bob", "retrieval_miss" if i < 8 else "stale_document", "",
                          NOW)  # fmt: skip
    queued = select_triage(store, week, seed="q", now=NOW)

    app, _ = review_app(store)
    client = signed_in(app)
    listing = client.get("/review/triage/")
    assert listing.status_code == 200 and f"/review/triage/{week}" in listing.text
    queue = client.get(f"/review/triage/{week}")
    assert queue.status_code == 200 and "0 of 20 triaged" in queue.text
    first = queued.items[0].trace_id
    page = client.get(f"/review/triage/{week}/items/{first}")
    assert page.status_code == 200 and all(key in page.text for key in CAUSES)
    assert "<script>alert" not in page.text  # the user's comment is text, never markup
    token = csrf_of(page.text)
    bad = client.post(f"/review/triage/{week}/label/{first}", data={"cause": "bad_vibes", "csrf_token": token})
    assert bad.status_code == 400 and "is not one of" in bad.text
    forged = client.post(f"/review/triage/{week}/label/{first}", data={"cause": "other", "csrf_token": "x"})
    assert forged.status_code == 403
    assert client.post(f"/review/triage/{week}/label/not-queued",
                       data={"cause": "other", "note": "x", "csrf_token": token}).status_code == 400
    for i, item in enumerate(queued.items):  # this week: unsupported claims dominate
        cause = "unsupported_claim" if i < 15 else "retrieval_miss"
        done = client.post(f"/review/triage/{week}/label/{item.trace_id}", data={"cause": cause, "csrf_token": token})
        assert done.status_code == 303
    assert "20 of 20 triaged" in client.get(f"/review/triage/{week}").text
    assert client.get("/review/triage/1999-W99").status_code == 404

    report = triage_report(store, week, 2)
    assert report.weeks == (earlier, week) and report.queued == (10, 20) and report.triaged == (10, 20)
    rows = {(r.cause, r.stratum): r for r in report.rows}
    unsupported, misses = rows[("unsupported_claim", "ALL")], rows[("retrieval_miss", "ALL")]
    assert unsupported.counts == (0, 15) and unsupported.share == pytest.approx(0.75)
    assert unsupported.trend_pp == pytest.approx(75.0) and misses.trend_pp == pytest.approx(25.0 - 80.0)
    by_stratum = sum(r.counts[1] for (c, s), r in rows.items() if c == "unsupported_claim" and s != "ALL")
    assert by_stratum == 15


def test_a_label_outside_the_taxonomy_or_without_a_note_for_other_is_refused(store: ClickHouseStore) -> None:
    week, traces = week_traces(10, ["billing"], seed=7)
    insert_traces(store, thumbs(traces, 1))
    item = select_triage(store, week, seed="x", now=NOW).items[0]
    for cause, note, why in (("other", "  ", "needs a note"), ("Retrieval_Miss", "", "is not one of"),
                             ("retrieval_miss", "x" * 2001, "at most")):
        with pytest.raises(InputError, match=why):
            save_triage_label(store, week, item.trace_id, "ana", cause, note, NOW)


def test_the_command_queues_and_reports_as_json(tmp_path) -> None:
    week, traces = week_traces(40, ["billing", "consent"], seed=8)
    path = tmp_path / "traces.jsonl"
    path.write_text("\n".join(json.dumps(t) for t in thumbs(traces, 4)) + "\n")
    env = dict(os.environ, RAGMON_STORE__DSN=f"chdb://{tmp_path / 'chdb'}", COLUMNS="200")

    def ragmon(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "ragmon", *args], capture_output=True, text=True, timeout=300,
                              env=env)  # fmt: skip

    assert ragmon("ingest", "--file", str(path)).returncode == 0
    before = datetime.now(UTC)
    done = ragmon("review", "triage", "--week", week, "--max-items", "4", "--seed", "s", "--format", "json")
    after = datetime.now(UTC)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    selection = out["selection"]
    assert {k: selection[k] for k in ("week", "queued", "thumbs_down", "seed", "already_selected", "added")} == {
        "week": week, "queued": 4, "thumbs_down": 10, "seed": "s", "already_selected": False, "added": 4}
    _, end = parse_week(week)
    assert selection["final_after"] == (end + timedelta(days=1)).isoformat()
    if before >= end + timedelta(days=1) or after < end + timedelta(days=1):  # not run across the boundary
        assert selection["final"] == (before >= end + timedelta(days=1))
        assert ("provisional" in done.stderr) == (not selection["final"])
    assert out["weeks"][-1] == week and out["queued"][-1] == 4 and out["rows"] == []
    table = ragmon("review", "triage", "--week", week)
    assert table.returncode == 0 and "already queued, nothing changed" in table.stdout
    bad = ragmon("review", "triage", "--week", "2026-W60")
    assert bad.returncode == 2 and "2026-W60" in bad.stderr
    future = ragmon("review", "triage", "--week", iso_week(datetime.now(UTC) + timedelta(weeks=3)))
    assert future.returncode == 2 and "has not started yet" in future.stderr
    current = ragmon("review", "triage", "--week", iso_week(datetime.now(UTC)), "--format", "json")
    assert current.returncode == 0 and "is not over" in current.stderr  # queued, with the warning


def test_the_triage_json_api_lists_queues_labels_and_reports(store: ClickHouseStore) -> None:
    from urllib.parse import quote

    from fastapi.testclient import TestClient

    from tests.integration.review.support import TOKENS

    week, traces = week_traces(40, ["billing", "consent"], seed=8)
    traces = thumbs(traces, 4)  # 10 thumbs-down
    insert_traces(store, traces)
    queued = select_triage(store, week, seed="api", now=NOW)
    app, _ = review_app(store)
    client, bearer = TestClient(app), {"Authorization": f"Bearer {TOKENS['alice']}"}
    base = "/review/api/v1/triage"
    assert client.get(f"{base}/weeks").status_code == 401
    listed = client.get(f"{base}/weeks", headers=bearer).json()
    assert listed["weeks"] == [{"week": week, "thumbs_down": 10, "queued": 10, "triaged": 0, "seed": "api"}]
    assert list(listed["causes"]) == list(CAUSES)
    queue = client.get(f"{base}/weeks/{week}/queue", headers=bearer).json()
    assert [i["trace_id"] for i in queue["items"]] == [i.trace_id for i in queued.items]
    first = queued.items[0]
    url = f"{base}/weeks/{week}/items/{quote(first.trace_id, safe='')}/label"
    assert client.put(url, headers=bearer, json={"cause": "retrieval_miss", "note": " no passage "}).json()["note"] \
        == "no passage"
    assert client.put(url, headers=bearer, json={"cause": "bad_vibes"}).status_code == 422
    assert client.put(url, headers=bearer, json={"cause": "other"}).status_code == 422  # 'other' needs a note
    assert client.put(url, headers=bearer, json={"cause": "other", "note": "x", "extra": 1}).status_code == 422
    forged = client.put(url, headers=bearer, json={"cause": "other", "note": "ok\u202e\u0000 forged"})
    assert forged.status_code == 422 and "invisible characters" in forged.text
    long = client.put(url, headers=bearer, json={"cause": "other", "note": "A" * 100_000})
    assert long.status_code == 422 and "A" * 3_000 not in long.text and len(long.content) < 2_000  # never echoed
    beyond = client.get(f"{base}/weeks/2026-W99/queue", headers=bearer)
    assert beyond.status_code == 404 and "ragmon review triage" not in beyond.text
    not_queued = next(t["trace_id"] for t in traces if not (t.get("feedback") or {}).get("rating") == -1)
    assert client.put(f"{base}/weeks/{week}/items/{not_queued}/label", headers=bearer,
                      json={"cause": "retrieval_miss"}).status_code == 404
    assert client.get(f"{base}/weeks/2026-W01/queue", headers=bearer).status_code == 404
    cookie = signed_in(app)  # a cookie session must send the CSRF token with a write
    assert cookie.put(url, json={"cause": "stale_document"}).status_code == 403
    page = cookie.get(f"/review/triage/{week}/items/{quote(first.trace_id, safe='')}").text
    assert cookie.put(url, json={"cause": "stale_document"}, headers={"X-CSRF-Token": csrf_of(page)}).status_code == 200
    queue = client.get(f"{base}/weeks/{week}/queue", headers=bearer).json()
    item = next(i for i in queue["items"] if i["trace_id"] == first.trace_id)
    assert (item["cause"], item["reviewer"], queue["triaged"]) == ("stale_document", "alice", 1)  # newest label wins
    report = client.get(f"{base}/weeks/{week}/report?weeks=2", headers=bearer).json()
    assert report["weeks"][-1] == week and report["triaged"][-1] == 1 and report["thumbs_down"][-1] == 10
    assert {(r["cause"], r["stratum"]) for r in report["rows"]} == {("stale_document", "ALL"),
                                                                    ("stale_document", first.category)}
    assert client.get(f"{base}/weeks/{week}/report?weeks=0", headers=bearer).status_code == 422


def _feedback_event(store: ClickHouseStore, trace: dict[str, Any], at: datetime, value: float = -1.0) -> None:
    store.insert_rows("outcomes", [[f"fb-{trace['trace_id']}-{at.timestamp()}", trace["query_id"], "feedback", at,
                                    value, at, "test"]],
                      ["event_id", "query_id", "kind", "time", "value", "received_at", "source"])


def test_late_negative_feedback_within_the_grace_is_queued_when_the_selection_runs_again(store) -> None:
    """Run within a day after the week ends, the selection is provisional: a thumbs-down event that arrives later
    (the docs count events up to a day after the week) is queued by the next run; after the grace it is final."""
    week, traces = week_traces(30, ["billing"], seed=11)
    traces[0] = {**traces[0], "feedback": {"rating": -1}}
    insert_traces(store, traces)
    _, end = parse_week(week)
    early = select_triage(store, week, seed="g", now=end + timedelta(hours=2))
    assert [i.trace_id for i in early.items] == [traces[0]["trace_id"]]
    assert not early.final and early.final_after == end + timedelta(days=1)
    _feedback_event(store, traces[1], end + timedelta(hours=5))  # late, but within the day after the week
    again = select_triage(store, week, seed="ignored", now=end + timedelta(hours=6))
    assert {i.trace_id for i in again.items} == {traces[0]["trace_id"], traces[1]["trace_id"]}
    assert again.already_selected and again.added == 1 and again.population == 2 and again.seed == "g"
    assert load_triage(store, week).population == 2
    _feedback_event(store, traces[2], end + timedelta(hours=23))
    final = select_triage(store, week, seed="g", now=end + timedelta(hours=25))  # the first run after the grace
    assert final.final and final.added == 1 and len(final.items) == 3
    _feedback_event(store, traces[3], end + timedelta(hours=30))  # beyond the day after the week: never counted
    _feedback_event(store, traces[4], end + timedelta(hours=20))  # within it, but arrived after the final run
    frozen = select_triage(store, week, seed="g", now=end + timedelta(days=3))
    assert frozen.final and frozen.already_selected and frozen.added == 0 and len(frozen.items) == 3


def test_a_capped_queue_topped_up_late_keeps_what_it_had_and_takes_late_ones_the_seed_ranks_first(store) -> None:
    week, traces = week_traces(60, ["billing"], seed=12)
    insert_traces(store, [{**t, "feedback": {"rating": -1}} for t in traces[:40]] + traces[40:])
    _, end = parse_week(week)
    first = select_triage(store, week, max_items=10, seed="cap", now=end + timedelta(hours=1))
    for t in traces[40:]:
        _feedback_event(store, t, end + timedelta(hours=3))
    again = select_triage(store, week, max_items=10, seed="cap", now=end + timedelta(hours=26))
    before = {i.trace_id for i in first.items}
    assert before <= {i.trace_id for i in again.items}  # nothing queued (maybe labelled) is taken away
    # the late ones that the seeded order puts among the first 10 of all 60 thumbs-down are added, no others
    everyone = select_triage(store, report_weeks(week, 3)[0], max_items=10, seed="cap", now=end)  # an empty week
    assert everyone.items == ()
    assert again.population == 60 and again.added == len({i.trace_id for i in again.items} - before) > 0
    assert all(i.trace_id in {t["trace_id"] for t in traces[40:]} for i in again.items if i.trace_id not in before)


def test_the_warning_for_a_week_in_its_grace_says_the_queue_is_provisional() -> None:
    from ragmon.review.triage import selection_warning

    week = "2026-W49"
    _, end = parse_week(week)
    assert selection_warning(week, end + timedelta(days=2)) is None
    soon = selection_warning(week, end + timedelta(hours=3))
    assert soon is not None and "provisional" in soon and "2026-12-08" in soon and "run again" in soon
    current = selection_warning(week, end - timedelta(days=2))
    assert current is not None and "is not over" in current


def test_the_review_role_tops_up_the_last_weeks_triage_until_the_grace_has_passed(store) -> None:
    from ragmon.review.role import ReviewRole
    from tests.integration.review.support import review_settings

    week, traces = week_traces(20, ["billing"], seed=13)
    traces[0] = {**traces[0], "feedback": {"rating": -1}}
    insert_traces(store, traces)
    _, end = parse_week(week)
    now = [end + timedelta(hours=1)]
    role = ReviewRole(review_settings(), store, clock=lambda: now[0].timestamp())
    assert role.auto_triage() == {week: 1}
    _feedback_event(store, traces[1], end + timedelta(hours=4))
    now[0] = end + timedelta(hours=5)
    assert role.auto_triage() == {week: 1}  # the late one
    _feedback_event(store, traces[2], end + timedelta(hours=12))
    now[0] = end + timedelta(hours=24, minutes=30)
    assert role.auto_triage() == {week: 1}  # the run after the grace: final
    now[0] = end + timedelta(hours=26)
    assert role.auto_triage() == {}
    assert {i.trace_id for i in load_triage(store, week).items} == {t["trace_id"] for t in traces[:3]}
