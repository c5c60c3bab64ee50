"""The console's pure parts: filter parsing and the links it carries, the safe preview of a dead letter's bytes,
SVG labels escaped, and the settings behind the alert links."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from urllib.parse import parse_qs

import pytest
from pydantic import ValidationError

from ragmon.config import ConsoleSettings
from ragmon.console.dead_letter_reading import Letter
from ragmon.console.dead_letters import PREVIEW_BYTES, escaped_text, hex_dump, view
from ragmon.console.filters import TraceFilter, parse_when
from ragmon.console.svg import ci_plot, stacked_bars
from ragmon.errors import InputError

NOW = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)


def test_times_parse_as_durations_iso_or_now():
    assert parse_when("90m", NOW, "since") == NOW - timedelta(minutes=90)
    assert parse_when("2026-12-01T09:00:00", NOW, "since") == datetime(2026, 12, 1, 9, tzinfo=UTC)
    assert parse_when("2026-12-01T09:00:00+01:00", NOW, "since") == datetime(2026, 12, 1, 8, tzinfo=UTC)
    assert parse_when("now", NOW, "until") == NOW
    with pytest.raises(InputError, match="since: expected"):
        parse_when("<script>", NOW, "since")


def test_filter_round_trips_through_its_query_string_and_refuses_bad_values():
    f = TraceFilter.from_query({"since": "2h", "stratum": "a&b <c>", "score": "failed", "page": "3"})
    again = TraceFilter.from_query({k: v[0] for k, v in parse_qs(f.query()).items()})
    assert again == f and parse_qs(f.query(page=4))["page"] == ["4"]
    assert TraceFilter().query() == ""  # defaults are left out
    assert f.window(NOW) == (NOW - timedelta(hours=2), NOW)
    for bad in ({"score": "x"}, {"page": "0"}, {"page": "-1"}, {"behaviour": "dance"}, {"stratum": "x" * 201}):
        with pytest.raises(InputError):
            TraceFilter.from_query(bad)
    with pytest.raises(InputError, match="before"):
        TraceFilter(since="1h", until="2h").window(NOW)


def test_letter_bytes_are_previewed_as_escaped_text_and_hex():
    assert escaped_text(b"a\\b\n\xff\x1b[31m\xe2\x80\xae<script>") == "a\\\\b\\n\\xff\\x1b[31m\\u202e<script>"
    assert escaped_text("日本 😀".encode()) == "日本 😀"
    assert hex_dump(b"hello\x00world<script>alert") == [
        "00000000  68 65 6c 6c 6f 00 77 6f 72 6c 64 3c 73 63 72 69  hello.world<scri",
        "00000010  70 74 3e 61 6c 65 72 74                          pt>alert"]
    big = view(Letter("json", "", "", b"y" * (PREVIEW_BYTES + 10), (), None, {}, ""))
    assert big.cut and big.size == PREVIEW_BYTES + 10 and len(big.text) == PREVIEW_BYTES


def test_svg_labels_are_escaped_and_non_finite_values_left_out():
    svg = ci_plot([("<script>x</script>", 0.1, -0.1, 0.3), ("nan", float("nan"), float("nan"), float("inf"))])
    assert "<script>" not in svg and "&lt;script&gt;" in svg and svg.count("<circle") == 1


def _tick_extents(svg: str) -> list[tuple[float, float, str]]:
    out = []
    for x, anchor, text in re.findall(r'<text class="tick" x="([\d.]+)" y="[\d.]+" text-anchor="(\w+)">([^<]*)<', svg):
        width = 6.5 * len(text)
        start = {"start": float(x), "middle": float(x) - width / 2, "end": float(x) - width}[anchor]
        out.append((start, start + width, text))
    return sorted(out)


def test_ci_plot_axis_labels_never_overlap():
    """Issue 32: an interval ending just past zero printed "-0.0076+0" (the end's label on top of zero's)."""
    for rows in ([("billing", -0.004, -0.0076, 0.0001)], [("a", 0.2, 0.1, 0.3)], [("a", -0.3, -0.5, 0.4)],
                 [("a", 0.00001, -0.00002, 0.9)]):
        ticks = _tick_extents(ci_plot(rows))
        assert any(text == "0" for *_, text in ticks) and len(ticks) >= 2, ticks
        assert all(a[1] <= b[0] for a, b in zip(ticks, ticks[1:], strict=False)), ticks
        assert not any(text in ("+0", "-0") for *_, text in ticks)


def test_stacked_bars_stack_each_hour_and_escape_names():
    svg = stacked_bars([("10:00", {"json": 3, "<b>x</b>": 1}), ("11:00", {"json": 1})], ["json", "<b>x</b>"])
    assert svg.count("<rect") == 3 + 2  # three bars' parts and two legend keys
    assert "<b>" not in svg and "&lt;b&gt;x&lt;/b&gt;" in svg
    assert stacked_bars([], ["json"]) == ""


def test_console_links_settings():
    assert ConsoleSettings().console_url("127.0.0.1", 9108, "host-1") == "http://127.0.0.1:9108"
    assert ConsoleSettings().console_url("0.0.0.0", 9108, "host-1") == "http://host-1:9108"
    assert ConsoleSettings().console_url("::1", 9108, "h") == "http://[::1]:9108"
    assert ConsoleSettings(public_url="https://r.example.com/").console_url("0.0.0.0", 1, "h") == "https://r.example.com"
    for bad in ("ftp://x", "https://x/ y", 'https://x/"'):
        with pytest.raises(ValidationError):
            ConsoleSettings(public_url=bad)


def test_a_trailing_references_label_says_how_it_is_cut():
    """The demo's reference (the day before a 6-hour current window) is one span of four windows; a seasonal
    one lists its same-hour windows."""
    from ragmon.console.drift_page import reference_note, reference_windows

    cur = datetime(2026, 12, 5, 3, 0)
    row = {"current_start": cur, "current_end": cur + timedelta(hours=6), "reference_start": cur - timedelta(days=1),
           "reference_end": cur, "details": {}}
    assert reference_windows(row) == [("2026-12-04T03:00:00.000Z", "2026-12-05T03:00:00.000Z")]
    assert reference_note(row) == "4 windows of 6 h, each as long as the current one"
    row["details"] = {"reference_slices": [["2026-12-04T03:00:00Z", "2026-12-04T09:00:00Z"]] * 7}
    assert len(reference_windows(row)) == 7 and reference_note(row) == ""
