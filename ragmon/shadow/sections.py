"""A ``ComparisonResult`` laid out as titled tables of plain-text cells, and as JSON-ready data.

Every output format (rich table, markdown, HTML, JSON) is rendered from this one layout, so they always say
the same thing. Cells are plain text — question text and chunk ids are untrusted and the renderers escape
them for their format. Must not do I/O.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ragmon.shadow.result import ComparisonResult, Example, StratumComparison


@dataclass(frozen=True)
class Section:
    title: str
    headers: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    note: str = ""


def num(value: float | None, digits: int = 3, signed: bool = False) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "–"
    return f"{value:+.{digits}f}" if signed else f"{value:.{digits}f}"


def pval(value: float | None) -> str:
    if value is None or not math.isfinite(value):
        return "–"
    return "<0.0001" if value < 1e-4 else f"{value:.4f}"


def pct(value: float | None) -> str:
    return "–" if value is None or not math.isfinite(value) else f"{100 * value:.2f}%"


def summary_lines(r: ComparisonResult) -> list[str]:
    o = r.overall
    return [
        f"baseline {r.baseline} vs candidate {r.candidate}",
        f"window {r.since.isoformat(timespec='seconds')} → {r.until.isoformat(timespec='seconds')}, k={r.k}",
        f"{o.pairs} pairs; unpaired: {o.baseline_only} baseline-only, {o.candidate_only} candidate-only "
        f"({r.baseline_traces} baseline and {r.candidate_traces} candidate traces in the window)",
        f"verdict: {r.verdict.decision.upper()} (exit code {r.exit_code}) — {'; '.join(r.verdict.reasons)}",
    ]


def _rows(r: ComparisonResult) -> list[StratumComparison]:
    return [*r.strata, r.overall]


def sections(r: ComparisonResult) -> list[Section]:
    """The report's tables; with no pairs only the verdicts (the notices say why there is nothing else)."""
    p = r.overall.agreement.rbo_p
    verdicts = Section("Verdict per stratum", ("stratum", "pairs", "verdict", "reasons"),
                       tuple((s.stratum, str(s.pairs), s.verdict.decision, "; ".join(s.verdict.reasons))
                             for s in _rows(r)))
    if r.pairs == 0:
        return [verdicts]
    out = [
        verdicts,
        Section("Ranking agreement", ("stratum", "pairs", "baseline-only", "candidate-only", f"overlap@{r.k}",
                                      f"RBO (p={p})", "top-1 agree", "Kendall τ (n)", "top-1 score KS D (p)",
                                      "Wasserstein"),
                tuple(_agreement_row(s) for s in _rows(r)),
                note="overlap@k is Jaccard of the top-k sets; Kendall τ is over the items both top-k lists share; "
                     "the score shift compares top-1 retrieval scores (a different retriever may use a different "
                     "score scale, so a shift alone is not a regression)"),
        Section(f"Operational (latency stage '{r.overall.operational.latency_stage}', ms)",
                ("stratum", "p50 base→cand (Δ)", "p95 base→cand (Δ)", "p99 base→cand (Δ)", "errors base/cand",
                 "empty base/cand", "context tokens base/cand", "cost/query base/cand (USD)"),
                tuple(_ops_row(s) for s in _rows(r))),
    ]
    quality = [
        (s.stratum, q.metric, q.source if q.source == "canary" else f"judge {q.judge_fingerprint[:12]}",
         str(q.result.n), num(q.result.mean_baseline), num(q.result.mean_candidate),
         num(q.result.mean_difference, signed=True),
         f"[{num(q.result.ci_low, signed=True)}, {num(q.result.ci_high, signed=True)}]",
         f"{q.result.sign_test.wins}/{q.result.sign_test.losses}/{q.result.sign_test.ties}",
         pval(q.result.sign_test.p_value))
        for s in _rows(r) for q in s.quality
    ]
    conf = f"{r.confidence:.0%}"
    out.append(Section("Quality (candidate − baseline, paired)",
                       ("stratum", "metric", "source", "pairs", "baseline", "candidate", "Δ mean", f"{conf} CI",
                        "wins/losses/ties", "sign test p"),
                       tuple(quality),
                       note=f"bootstrap {r.n_resamples} resamples, seed {r.seed}; judge metrics compare only pairs "
                            "judged with the same fingerprint; canary metrics are computed at k="
                            f"{r.k} from the golden set" if quality else
                            "no quality data (no judged pairs with one fingerprint, no canary queries)"))
    return out


def _agreement_row(s: StratumComparison) -> tuple[str, ...]:
    a = s.agreement
    shift = s.shift
    ks = f"{num(shift.ks_statistic)} ({pval(shift.ks_p_value)})" if shift else "–"
    return (s.stratum, str(s.pairs), str(s.baseline_only), str(s.candidate_only), num(a.mean_overlap),
            num(a.mean_rbo), pct(a.top1_rate) if a.n_top1 else "–", f"{num(a.mean_tau)} ({a.n_tau})", ks,
            num(shift.wasserstein, 4) if shift else "–")


def _ops_row(s: StratumComparison) -> tuple[str, ...]:
    o = s.operational
    b, c = o.baseline, o.candidate
    cells = [s.stratum]
    for i in range(3):
        if b.latency_ms is None or c.latency_ms is None:
            cells.append("–")
        else:
            cells.append(f"{b.latency_ms[i]:.1f}→{c.latency_ms[i]:.1f} ({c.latency_ms[i] - b.latency_ms[i]:+.1f})")
    cells += [f"{pct(b.error_rate)}/{pct(c.error_rate)}", f"{pct(b.empty_rate)}/{pct(c.empty_rate)}",
              f"{num(b.context_tokens, 0)}/{num(c.context_tokens, 0)}",
              f"{num(b.cost_mean_usd, 6)}/{num(c.cost_mean_usd, 6)}"]
    return tuple(cells)


def example_title(kind: str, e: Example) -> str:
    if e.metric == "rbo":
        return f"{kind} · {e.stratum} · RBO {e.candidate_value:.3f} · query {e.query_id}"
    return (f"{kind} · {e.stratum} · {e.metric} {e.baseline_value:.3f} → {e.candidate_value:.3f} "
            f"({e.difference:+.3f}) · query {e.query_id}")


def example_rows(e: Example) -> tuple[tuple[str, str, str], ...]:
    """rank | baseline chunk | candidate chunk, with ✓ on chunks a canary's golden case marks relevant."""
    rel = set(e.relevant)
    n = max(len(e.baseline_top_k), len(e.candidate_top_k))

    def cell(items: tuple[str, ...], i: int) -> str:
        if i >= len(items):
            return ""
        return f"{items[i]} ✓" if items[i] in rel else items[i]

    return tuple((str(i + 1), cell(e.baseline_top_k, i), cell(e.candidate_top_k, i)) for i in range(n))


def example_groups(r: ComparisonResult) -> list[tuple[str, tuple[Example, ...]]]:
    ex = r.examples
    if ex.kind == "quality":
        return [(f"Largest gains by {ex.metric}", ex.gains), (f"Largest losses by {ex.metric}", ex.losses)]
    if ex.kind == "disagreement":
        return [("Largest ranking disagreements (no quality data: a disagreement is not a loss)", ex.losses)]
    return []


def to_data(r: ComparisonResult) -> dict[str, Any]:
    """JSON-ready data: every field of the result, NaN/inf as null, datetimes as ISO 8601."""

    def clean(value: Any) -> Any:
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            return clean({f.name: getattr(value, f.name) for f in dataclasses.fields(value)})
        if isinstance(value, float):
            return value if math.isfinite(value) else None
        if isinstance(value, datetime):
            return value.isoformat()
        if isinstance(value, dict):
            return {str(k): clean(v) for k, v in value.items()}
        if isinstance(value, list | tuple | set):
            return [clean(v) for v in value]
        return value

    out = clean(r)
    out["schema"] = "ragmon.shadow-comparison.v1"
    out["pairs"] = r.pairs
    return out
