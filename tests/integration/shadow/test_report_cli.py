"""Reports escape untrusted text in every format; the CLI's exit codes and messages; the live gauges."""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime, timedelta
from html.parser import HTMLParser

import pytest

from ragmon.cli.app import main
from ragmon.config import Settings
from ragmon.demo.traffic import HOSTILE_TEXT, RetrieverProfile, generate_golden, generate_traces
from ragmon.shadow.compare import CompareOptions, compare
from ragmon.shadow.live import run_configured_comparisons
from ragmon.shadow.metrics import ShadowMetrics
from ragmon.shadow.pairs import RetrieverRef
from ragmon.shadow.report import render
from ragmon.telemetry import Telemetry

from .support import insert_traces

CANDIDATE = RetrieverProfile(name="dense", version="v2", stratum_noise={"billing": 1.4, "consent": 0.12})


class Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: set[str] = set()
        self.attrs: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.add(tag)
        self.attrs += [name for name, _ in attrs]


@pytest.fixture
def hostile(store):
    docs = generate_traces(400, seed=9, candidate=CANDIDATE, hostile_every=1)
    for d in docs:  # chunk ids are producer data too
        if d["retriever"]["variant"] == "production":
            d["retrieved"][0]["chunk_id"] = '<b onmouseover="x()">|*evil*|</b>'
    insert_traces(store, docs)
    now = datetime.now(UTC)
    return compare(store, CompareOptions(RetrieverRef("hybrid", "", "production"), RetrieverRef("dense", "", "shadow"),
                                         now - timedelta(days=1), now + timedelta(minutes=1), n_resamples=200))


def test_html_escapes_everything(hostile):
    assert hostile.examples.kind == "disagreement" and hostile.examples.losses
    page = render(hostile, "html")
    parser = Tags()
    parser.feed(page)
    assert parser.tags <= {"html", "head", "meta", "title", "style", "body", "h1", "h2", "h3", "ul", "li", "span",
                           "table", "tr", "th", "td", "caption", "blockquote", "p"}
    assert "onerror" not in parser.attrs and "onmouseover" not in parser.attrs
    assert "&lt;img src=x onerror=&quot;alert(1)&quot;&gt;" in page
    assert "<script" not in page and "<img" not in page


def test_markdown_and_table_keep_text_as_data(hostile):
    md = render(hostile, "markdown")
    assert "<img" not in md and "&lt;img" in md
    evil = [line for line in md.splitlines() if line.startswith("|") and "evil" in line]
    assert len(evil) == 5  # one per example shown
    for line in evil:
        assert "\\|\\*evil\\*\\|" in line  # a pipe in a chunk id cannot split the table
        assert line.count(" | ") == 2  # still three cells
    table = render(hostile, "table")
    assert '<img src=x onerror="alert(1)">' in table  # rich shows it verbatim, never as markup
    data = json.loads(render(hostile, "json"))
    assert data["schema"] == "ragmon.shadow-comparison.v1"
    assert data["pairs"] == hostile.pairs == 400
    assert {s["stratum"] for s in data["strata"]} == {"billing", "consent", "shipping", "returns"}
    assert HOSTILE_TEXT not in json.dumps(data)  # chunk text is never copied into a report


def cli(monkeypatch, capsys, store_settings, *args: str) -> tuple[int, str, str]:
    monkeypatch.setenv("RAGMON_STORE__DSN", store_settings.dsn.get_secret_value())
    monkeypatch.setenv("RAGMON_STORE__DATABASE", store_settings.database)
    monkeypatch.delenv("RAGMON_CONFIG", raising=False)
    monkeypatch.setattr(sys, "argv", ["ragmon", "shadow", "compare", *args])
    with pytest.raises(SystemExit) as exc:
        main()
    out = capsys.readouterr()
    return int(exc.value.code or 0), out.out, out.err


def test_cli_verdicts_and_exit_codes(store, store_settings, monkeypatch, capsys, tmp_path):
    insert_traces(store, generate_traces(800, seed=3, candidate=CANDIDATE))
    golden = tmp_path / "golden.json"
    golden.write_text(json.dumps(generate_golden(800, seed=3, every=3)))
    base = ["--baseline", "hybrid@v1", "--candidate", "dense@v2", "--since", "2d", "--resamples", "300"]

    code, out, _ = cli(monkeypatch, capsys, store_settings, *base)
    assert code == 4 and "HOLD" in out and "no thresholds given" in out

    report = tmp_path / "report.json"
    code, _, err = cli(monkeypatch, capsys, store_settings, *base, "--golden", str(golden), "--max-quality-drop",
                       "ndcg_at_k=0.02", "--min-pairs", "30", "--format", "json", "--out", str(report))
    assert code == 1 and "verdict reject" in err
    data = json.loads(report.read_text())
    verdicts = {s["stratum"]: s["verdict"]["decision"] for s in data["strata"]}
    assert verdicts["billing"] == "reject" and verdicts["consent"] == "promote"
    assert data["exit_code"] == 1 and data["thresholds"]["max_quality_drop"] == {"ndcg_at_k": 0.02}

    # a different retriever passing only a point threshold: nothing measured whether its chunks are better
    code, out, _ = cli(monkeypatch, capsys, store_settings, *base, "--min-overlap", "0.01", "--format", "markdown")
    assert code == 4 and "HOLD" in out and "retrieval changed a lot" in out
    judged = ["--golden", str(golden), "--max-quality-drop", "ndcg_at_k=1", "--min-overlap", "0.01"]
    code, out, _ = cli(monkeypatch, capsys, store_settings, *base, *judged, "--format", "markdown")
    assert code == 0 and "PROMOTE" in out and "## Verdict per stratum" in out

    table = tmp_path / "report.txt"  # the terminal table, written to a file: stdout stays empty
    code, out, err = cli(monkeypatch, capsys, store_settings, *base, *judged, "--out", str(table))
    assert code == 0 and out == "" and "wrote table report" in err
    assert "PROMOTE" in table.read_text()


@pytest.mark.parametrize(("args", "message"), [
    (["--since", "yesterday"], "neither an ISO 8601 time"),
    (["--since", "99999999999d"], "before year 1"),
    (["--k", "0"], "--k must be between 1 and 1000"),
    (["--rbo-p", "1"], "--rbo-p must be in (0, 1)"),
    (["--max-quality-drop", "ndcg"], "METRIC=X"),
    (["--format", "pdf"], "--format 'pdf'"),
    (["--candidate", "hybrid@v1", "--candidate-variant", "production"], "both select"),
    (["--golden", "/nonexistent/golden.json"], "cannot read"),
    (["--min-overlap", "2"], "min_overlap must be in [0, 1]"),
])
def test_cli_bad_arguments_exit_2_with_a_message(store, store_settings, monkeypatch, capsys, args, message):
    base = {"--baseline": "hybrid@v1", "--candidate": "dense@v2"}
    for i in range(0, len(args) - 1, 2):
        base[args[i]] = args[i + 1]
    flat = [x for kv in base.items() for x in kv]
    code, _, err = cli(monkeypatch, capsys, store_settings, *flat)
    assert code == 2
    assert message in " ".join(err.split())
    assert "Traceback" not in err


def test_cli_malformed_golden_file(store, store_settings, monkeypatch, capsys, tmp_path):
    bad = tmp_path / "golden.json"
    bad.write_text(json.dumps([{"id": "x", "question": "q", "category": "c", "expected_behaviour": "answer"}]))
    code, _, err = cli(monkeypatch, capsys, store_settings, "--baseline", "a", "--candidate", "b", "--golden", str(bad))
    assert code == 2 and "not a valid golden set at 0" in err and "reference passage" in err


def test_live_gauges(store):
    insert_traces(store, generate_traces(400, seed=5, candidate=RetrieverProfile(name="dense", version="v2",
                                                                                 latency_ms_median=80.0)))
    settings = Settings(shadow={"comparisons": [
        {"baseline": "hybrid@v1", "candidate": "dense@v2", "window_seconds": 86400},
        {"baseline": "hybrid@v1", "candidate": "dense@v9", "window_seconds": 86400},  # emits nothing yet
    ]})
    telemetry = Telemetry()
    metrics = telemetry.use(ShadowMetrics)
    results = run_configured_comparisons(store, settings, metrics)
    assert len(results) == 2 and results[1].pairs == 0
    get = telemetry.registry.get_sample_value
    labels = {"baseline": "hybrid@v1", "candidate": "dense@v2"}
    assert get("ragmon_shadow_pairs", {**labels, "stratum": "all"}) == 400
    overlap = get("ragmon_shadow_overlap_at_k", {**labels, "stratum": "billing"})
    assert overlap == pytest.approx(next(s for s in results[0].strata if s.stratum == "billing").agreement.mean_overlap)
    p95 = get("ragmon_shadow_latency_delta_seconds", {**labels, "stratum": "all", "quantile": "0.95"})
    assert p95 == pytest.approx(results[0].overall.operational.latency_delta_ms()[1] / 1000) and p95 > 0.01
    assert get("ragmon_shadow_pairs", {"baseline": "hybrid@v1", "candidate": "dense@v9", "stratum": "all"}) == 0
    assert get("ragmon_shadow_overlap_at_k", {"baseline": "hybrid@v1", "candidate": "dense@v9",
                                              "stratum": "all"}) is None  # no pairs: no made-up overlap
    assert get("ragmon_shadow_runs_total", {"outcome": "ok"}) == 2
    assert get("ragmon_shadow_last_run_timestamp_seconds", labels) > 0
    # a stratum that leaves the window stops being reported
    store.command(f"ALTER TABLE {store.table('traces')} DELETE WHERE category = 'billing' SETTINGS mutations_sync = 1")
    run_configured_comparisons(store, settings, metrics)
    assert get("ragmon_shadow_overlap_at_k", {**labels, "stratum": "billing"}) is None
    assert get("ragmon_shadow_pairs", {**labels, "stratum": "all"}) == 300
    # a failing store is counted per comparison and never raised out of the periodic job
    store.command(f"DROP TABLE {store.table('scores')}")
    assert run_configured_comparisons(store, settings, metrics) == []
    assert get("ragmon_shadow_runs_total", {"outcome": "error"}) == 2


def test_comparison_settings_are_checked_at_start_up():
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="both select hybrid"):
        Settings(shadow={"comparisons": [{"baseline": "hybrid", "candidate": "hybrid",
                                          "candidate_variant": "production"}]})
    with pytest.raises(ValidationError, match="pattern"):
        Settings(shadow={"comparisons": [{"baseline": "hybrid", "candidate": "a@b@c"}]})
