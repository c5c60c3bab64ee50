"""The gate's verdict: per-stratum rows (and ALL) of retrieval metrics, latency and permission leaks, checked against
thresholds (any leak fails its stratum unless a named approver allowed leaks).

Every stratum is gated, not only the total: one collapsed category averages away against nine healthy ones.
Thresholds are required inputs with no defaults here either. A stratum with no answerable case has nothing to
gate and cannot fail (its row says so). Each row carries a 95% interval of its coverage (Wilson, over its scored
cases), so a verdict on 1 of 2 cases shows how little it knows; with ``min_cases`` a stratum with fewer scored
cases is not gated on its own (its misses are listed as ``too_few``, its cases still count in ALL). This module
aggregates and renders; it does not call retrievers.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

from rich.markup import escape
from rich.table import Table

from ragmon.gate.runner import CaseRun
from ragmon.gated import ALL as ALL  # the gate's reports name their all-strata row this way
from ragmon.gated import StrataReport, per_stratum
from ragmon.metrics.cost import percentile
from ragmon.metrics.summary import mean_defined
from ragmon.stats.intervals import wilson_interval


@dataclass(frozen=True, slots=True)
class Thresholds:
    """What every stratum must reach. ``None`` for an optional threshold means it is not gated."""

    min_coverage: float
    min_mrr: float
    min_ndcg: float | None = None
    max_p95_ms: float | None = None
    #: strata with fewer scored cases are reported, not gated on their own (None: every stratum is gated)
    min_cases: int | None = None
    leaks_allowed: bool = False  # --allow-leaks: a named approver let permission leaks pass (recorded in the artifact)

    def problems(self) -> list[str]:
        out = []
        if self.min_cases is not None and self.min_cases < 1:
            out.append(f"--min-cases must be at least 1, got {self.min_cases}")
        for name in ("min_coverage", "min_mrr", "min_ndcg"):
            value = getattr(self, name)
            if value is not None and (not math.isfinite(value) or not 0 <= value <= 1):
                out.append(f"--{name.replace('_', '-')} must be between 0 and 1, got {value}")
        if self.max_p95_ms is not None and (not math.isfinite(self.max_p95_ms) or self.max_p95_ms <= 0):
            out.append(f"--max-p95-ms must be a positive number of milliseconds, got {self.max_p95_ms}")
        return out


@dataclass(frozen=True, slots=True)
class StratumRow:
    """One line of the report; ``failures`` names each threshold the stratum missed."""

    stratum: str
    n_cases: int
    n_scored: int
    n_excluded: int
    n_errors: int
    coverage_at_k: float | None
    recall_at_depth: float | None
    hit_at_k: float | None
    mrr_at_k: float | None
    ndcg_at_k: float | None
    latency_p50_ms: float | None
    latency_p95_ms: float | None
    failures: tuple[str, ...]
    #: 95% Wilson interval of coverage_at_k over the scored cases (None when nothing was scored)
    coverage_ci: tuple[float, float] | None = None
    #: thresholds missed by a stratum with fewer than ``min_cases`` scored cases: shown, not failing the gate
    too_few: tuple[str, ...] = ()
    leak_checked: int = 0  # cases with a tenant, checked for other tenants' chunks (answerable or not)
    permission_leaks: int | None = None  # leaked chunks over those cases; None when none was checked


@dataclass(frozen=True, slots=True)
class GateResult(StrataReport[StratumRow]):
    """The whole verdict, with the parameters it was reached under."""

    k: int
    depth: int
    thresholds: Thresholds
    rows: tuple[StratumRow, ...]  # strata in name order, then ALL

    def parameters(self) -> dict[str, object]:
        return {"k": self.k, "depth": self.depth, "thresholds": asdict(self.thresholds)}


def _row(name: str, runs: Sequence[CaseRun], t: Thresholds) -> StratumRow:
    scored = [r for r in runs if not r.excluded]
    metrics = [r.metrics for r in scored if r.metrics is not None]
    latencies = [r.latency_ms for r in scored if r.latency_ms is not None]
    row = {
        "coverage_at_k": mean_defined(m.recall_at_k for m in metrics),
        "recall_at_depth": mean_defined(m.recall_at_depth for m in metrics),
        "hit_at_k": mean_defined(m.hit_at_k for m in metrics),
        "mrr_at_k": mean_defined(m.reciprocal_rank_at_k for m in metrics),
        "ndcg_at_k": mean_defined(m.ndcg_at_k for m in metrics),
        "latency_p50_ms": percentile(latencies, 50),
        "latency_p95_ms": percentile(latencies, 95),
    }
    failures = []
    checks = (("coverage_at_k", t.min_coverage), ("mrr_at_k", t.min_mrr), ("ndcg_at_k", t.min_ndcg))
    for metric, minimum in checks:
        value = row[metric]
        if minimum is not None and value is not None and value < minimum:
            failures.append(metric)
    p95 = row["latency_p95_ms"]
    if t.max_p95_ms is not None and p95 is not None and p95 > t.max_p95_ms:
        failures.append("latency_p95_ms")
    n_cov = sum(1 for m in metrics if m.recall_at_k is not None)
    coverage = row["coverage_at_k"]
    tiny = t.min_cases is not None and name != ALL and len(scored) < t.min_cases
    checked = sum(1 for r in runs if r.leak_checked)
    leaks = sum(len(r.leaks) for r in runs) if checked else None
    if leaks and not t.leaks_allowed:  # target zero: any leak fails the stratum, whatever the other metrics say
        failures.append("permission_leaks")
    return StratumRow(
        stratum=name,
        n_cases=len(runs),
        n_scored=len(scored),
        n_excluded=len(runs) - len(scored),
        n_errors=sum(1 for r in scored if r.error is not None),
        # a leak fails its stratum however few its cases: its target is zero, not a rate to estimate
        failures=tuple(f for f in failures if f == "permission_leaks") if tiny else tuple(failures),
        coverage_ci=wilson_interval(coverage, n_cov) if coverage is not None and n_cov else None,
        too_few=tuple(f for f in failures if f != "permission_leaks") if tiny else (),
        leak_checked=checked,
        permission_leaks=leaks,
        **row,
    )


def small_strata_notes(result: GateResult, below: int = 5) -> list[str]:
    """One note per stratum gated (or not) on fewer than ``below`` scored cases: its coverage interval."""
    notes = []
    for row in result.rows[:-1]:
        if 0 < row.n_scored < below and row.coverage_ci is not None and row.coverage_at_k is not None:
            low, high = row.coverage_ci
            verdict = (f"not gated on its own (--min-cases {result.thresholds.min_cases}; missed "
                       f"{', '.join(row.too_few)})" if row.too_few else "FAIL" if row.failures else "pass")
            notes.append(f"{row.stratum}: {verdict} on {row.n_scored} case(s): coverage@{result.k} "
                         f"{row.coverage_at_k:.3f}, 95% CI [{low:.2f}, {high:.2f}]; add cases before trusting it")
    return notes


def build_result(runs: Sequence[CaseRun], thresholds: Thresholds, k: int, depth: int) -> GateResult:
    """Group runs by category, aggregate each group and all of them, and check every row."""
    rows = per_stratum(runs, lambda run: run.category, lambda name, group: _row(name, group, thresholds))
    return GateResult(k=k, depth=depth, thresholds=thresholds, rows=rows)


COLUMNS = (
    ("n", "n_scored"),
    ("excl", "n_excluded"),
    ("err", "n_errors"),
    ("coverage@k", "coverage_at_k"),
    ("recall@depth", "recall_at_depth"),
    ("hit@k", "hit_at_k"),
    ("MRR@k", "mrr_at_k"),
    ("nDCG@k", "ndcg_at_k"),
    ("p50 ms", "latency_p50_ms"),
    ("p95 ms", "latency_p95_ms"),
    ("leaks", "permission_leaks"),
)


def _cell(row: StratumRow, field: str) -> str:
    value = getattr(row, field)
    if value is None:
        return "—"
    if isinstance(value, int):
        text = str(value)
    elif field.startswith("latency"):
        text = f"{value:.1f}"
    else:
        text = f"{value:.3f}"
    return f"{text} FAIL" if field in row.failures else text


def _headers(result: GateResult) -> list[str]:
    names = {"coverage@k": f"coverage@{result.k}", "recall@depth": f"recall@{result.depth}",
             "hit@k": f"hit@{result.k}", "MRR@k": f"MRR@{result.k}", "nDCG@k": f"nDCG@{result.k}"}  # fmt: skip
    return ["stratum", *(names.get(h, h) for h, _ in COLUMNS), "verdict"]


def render_table(result: GateResult) -> Table:
    """A rich table; FAIL marks the missed metric's cell and the row's verdict."""
    table = Table(title=f"ragmon gate: k={result.k}, depth={result.depth}", title_justify="left")
    for i, header in enumerate(_headers(result)):
        table.add_column(header, justify="left" if i == 0 else "right", no_wrap=True)
    for row in result.rows:
        cells = [_cell(row, field) for _, field in COLUMNS]
        styled = [f"[bold red]{c}[/]" if c.endswith("FAIL") else c for c in cells]
        verdict = "[bold red]FAIL[/]" if row.failures else "[yellow]too few[/]" if row.too_few else "[green]pass[/]"
        table.add_row(escape(row.stratum) if row is not result.rows[-1] else "[bold]ALL[/]", *styled, verdict,
                      end_section=row is result.rows[-2] if len(result.rows) > 1 else False)  # fmt: skip
    return table


def render_markdown(result: GateResult) -> str:
    """A GitHub-flavoured Markdown table (for CI summaries and pull-request comments)."""
    headers = _headers(result)
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join(["---"] + ["---:"] * (len(headers) - 1)) + "|"]
    for row in result.rows:
        cells = [_cell(row, field).replace(" FAIL", " **FAIL**") for _, field in COLUMNS]
        name = row.stratum.replace("|", "\\|")
        verdict = "**FAIL**" if row.failures else "too few" if row.too_few else "pass"
        lines.append("| " + " | ".join([name, *cells, verdict]) + " |")
    return "\n".join(lines) + "\n"


def render_json(payload: dict[str, object]) -> str:
    return json.dumps(payload, indent=2, ensure_ascii=False, allow_nan=False)
