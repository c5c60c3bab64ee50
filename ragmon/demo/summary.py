"""Printing what the demo found, next to what it injected, as tables a person can read."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.table import Table

from ragmon.ab.report import rich_renderable as ab_renderable
from ragmon.coverage.report import rich_renderable as coverage_renderable
from ragmon.demo.loop_summary import judge_drift_renderable, triage_renderable
from ragmon.demo.run import DemoResult
from ragmon.leaks.listing import LeakListing


def _fmt(x: float, digits: int = 3) -> str:
    return "–" if x != x else f"{x:.{digits}g}"  # NaN → dash


def _why(reasons: tuple[str, ...]) -> str:
    """The reasons that decided the verdict (failed, then inconclusive), or all when every check passed."""
    deciding = [r for r in reasons if r.startswith("FAIL")] or [r for r in reasons if r.startswith("?")]
    shown = deciding or list(reasons)
    return "; ".join(shown[:2]) + (f" (+{len(shown) - 2} more)" if len(shown) > 2 else "")


def print_summary(console: Console, r: DemoResult, data_dir: Path, golden_path: Path) -> None:
    """What the demo injected, then what each part found (ingest, scoring, drift, leaks, review, shadow, coverage,
    A/B, triage, judge drift), then the commands that read the same data."""
    _print_injected(console, r)
    console.print(_ingest_table(r))
    sc = r.scored
    console.print(f"Scored {sc.scored:,} sampled traces with the heuristic judge "
                  f"({sc.failed} failed) in {r.score_seconds:.1f}s; sampling decisions recorded: "
                  f"{sum(sc.decisions.values()):,} ({dict(sc.decisions)}).",
                  highlight=False)
    console.print(_drift_table(r))
    if r.leaks is not None:
        console.print(_leaks_table(r.leaks, r.stored))
    rv = r.review
    console.print(f"Review: week {rv.week}: {len(rv.items)} traces chosen at random from {rv.population:,} production "
                  f"traces (seed {rv.seed}, per stratum {rv.selected_by_stratum()}).", highlight=False)
    console.print(_shadow_table(r))
    _print_loops(console, r)
    _print_commands(console, r, data_dir, golden_path)


def _print_injected(console: Console, r: DemoResult) -> None:
    """The title and what the scenario injected, so each finding below can be read against it."""
    s = r.scenario
    if console.is_terminal:
        console.rule("[bold]ragmon demo")
    else:  # off a terminal the console is wide (tables are never cut), a rule would be 1,000 characters
        console.print("== ragmon demo ==")
    console.print(
        f"Injected: from {s.incident_start(r.now):%Y-%m-%d %H:%M} UTC on, stratum [bold]{s.incident_stratum}[/] of "
        f"hybrid@v1 (production): retrieval scores ×{s.score_scale} (stale index) and unsupported answers "
        f"(faithfulness drop); {s.leaks} production trace(s) of stratum [bold]{s.leak_stratum}[/] retrieve a chunk of "
        "another tenant (permission leak). Shadow candidate hybrid@v2: better on shipping, worse on returns. "
        f"Users thumbs-down {s.thumbs_down_share:.0%} of the incident's unsupported answers (over a "
        f"{s.thumbs_down_background:.1%} background everywhere). {s.history_weeks} thin past weeks "
        f"({s.history_per_week} production traces each) are reviewed by SIMULATED reviewers who part ways with the "
        f"judge in the last of them in stratum [bold]{s.judge_drift_stratum}[/] (judge drift).",
        highlight=False)


def _ingest_table(r: DemoResult) -> Table:
    """Messages produced, stored, dead-lettered and redacted, and the ingest rate."""
    ingest = Table(title="Ingest", title_justify="left")
    for col in ("messages", "stored (FINAL)", "dead-lettered", "redactions", "traces/s"):
        ingest.add_column(col, justify="right")
    dead = ", ".join(f"{k}: {v}" for k, v in sorted(r.dead_letters.items())) or "0"
    rate = r.stored / r.ingest_seconds if r.ingest_seconds else 0.0
    ingest.add_row(f"{r.produced + sum(r.dead_letters.values()):,}", f"{r.stored:,}", dead, f"{r.redactions:,}",
                   f"{rate:,.0f}")
    return ingest


def _drift_table(r: DemoResult) -> Table:
    """The drift tests that found drift (or persistent drift), by stratum, feature and test."""
    drift = Table(title=f"Drift detected (check {r.drift.check_id[:12]}, {len(r.drift.results)} tests, "
                        "Benjamini–Hochberg within each stratum; PERSISTENT is what pages)", title_justify="left")
    for col in ("retriever", "variant", "stratum", "feature", "test", "verdict", "z", "p (adj.)", "effect",
                "n ref/cur"):
        drift.add_column(col)
    shown = [d for d in r.drift.results if d.drifted or d.persistent]
    for d in sorted(shown, key=lambda d: (d.group.stratum, d.feature, d.test)):
        drift.add_row(d.group.retriever, d.group.variant, d.group.stratum, d.feature, d.test,
                      "PERSISTENT" if d.persistent else "drift", _fmt(d.statistic), _fmt(d.p_adjusted),
                      f"{_fmt(d.effect)} ({d.effect_name})", f"{d.reference.n}/{d.current.n}")
    if not shown:
        drift.add_row(*(["none"] + [""] * 9))
    return drift


def _leaks_table(report: LeakListing, stored: int) -> Table:
    """The traces that retrieved another tenant's chunk (of the ``stored`` ones), and the retrievers that served
    them."""
    leaks = Table(title=f"Permission leaks (counted on all {stored:,} traces; RagmonPermissionLeak pages on "
                        f"any): {report.total_traces} trace(s), {report.total_leaks} chunk(s)",
                  title_justify="left")  # fmt: skip
    for col in ("trace", "stratum", "user tenant", "leaked chunk (tenant)"):
        leaks.add_column(col)
    for t in report.traces:
        leaks.add_row(t.trace_id, t.stratum, t.user_tenant,
                      ", ".join(f"{c.chunk_id} ({c.tenant})" for c in t.chunks))
    if not report.traces:
        leaks.add_row("none", *[""] * 3)
    if by := sorted({f"{t.retriever} ({t.variant})" for t in report.traces}):
        leaks.caption = "retriever: " + ", ".join(by)
    return leaks


def _shadow_table(r: DemoResult) -> Table:
    """The shadow comparison's verdict per stratum, with the reasons that decided it."""
    sh = r.shadow
    shadow = Table(title=f"Shadow: {sh.candidate} vs {sh.baseline}, k={sh.k}, {sh.pairs:,} pairs — overall verdict: "
                         f"{sh.verdict.decision.upper()} (exit code {sh.exit_code})", title_justify="left")
    for col in ("stratum", "pairs", "overlap@k", "verdict", "why"):
        shadow.add_column(col)
    for st in sh.strata:
        shadow.add_row(st.stratum, f"{st.pairs:,}", _fmt(st.agreement.mean_overlap), st.verdict.decision,
                       _why(st.verdict.reasons))
    return shadow


def _print_loops(console: Console, r: DemoResult) -> None:
    """The loops the scenario ran when it had data for them: question-type coverage, the A/B canary, the
    thumbs-down triage and the judge-drift check."""
    s = r.scenario
    if r.coverage is not None:
        cv = r.coverage
        console.print(f"Question-type coverage (golden set from the first day's logs vs the last "
                      f"{s.new_type_hours:g}h; injected: {s.new_type_share:.0%} table-number questions in "
                      f"{s.new_type_stratum}), exit code {cv.exit_code}:", highlight=False)
        console.print(coverage_renderable(cv))
    if r.ab is not None:
        console.print(f"A/B: a canary cohort ({s.canary_share:.0%} of production queries for the last "
                      f"{s.canary_hours:g}h) on hybrid@v2 whose users reformulate {s.canary_reformulation:.0%} of the "
                      f"time against {s.reformulation:.0%}:", highlight=False)
        console.print(ab_renderable(r.ab))
    if r.triage is not None:
        console.print(triage_renderable(r.triage, s))
    if r.judge_drift is not None:
        console.print(judge_drift_renderable(r.judge_drift))


def _print_commands(console: Console, r: DemoResult, data_dir: Path, golden_path: Path) -> None:
    """Where the data is and the commands that read it again."""
    s = r.scenario
    env = f"RAGMON_STORE__DSN=chdb://{data_dir} RAGMON_STORE__DATABASE=ragmon_demo"
    console.print(
        f"Data: {data_dir} (database ragmon_demo). `ragmon demo --keep-serving` serves the review UI, the console "
        "and /metrics on it (and prints where). These commands read the same data (prefix each with the "
        f"environment {env}):", highlight=False, soft_wrap=True)
    commands = Table.grid(padding=(0, 2))
    for command, what in (
        ("ragmon drift report", "the drift check, with both windows' histograms"),
        ("ragmon shadow compare --baseline hybrid@v1 --candidate hybrid@v2", "the shadow comparison"),
        ("ragmon leaks list --since 3d", "the leaking traces"),
        (f"ragmon golden coverage --golden {golden_path} --since {s.new_type_hours:g}h", "question-type coverage"),
        (f"ragmon ab compare --baseline hybrid@v1 --candidate hybrid@v2 --since {s.canary_hours:g}h",
         "the canary cohort (since it started)"),
        ("ragmon review triage --no-select", "the thumbs-down triage queue and report"),
        ("ragmon drift judge-agreement", "judge-vs-reviewer agreement by week (simulated reviewers)"),
    ):
        commands.add_row(command, f"[dim]{what}[/]")
    console.print(commands)
