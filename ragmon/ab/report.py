"""Rendering an ``AbResult``: a rich table for the terminal, JSON for pipelines (every number at full precision,
every time ISO 8601 with its UTC offset). Layout only: no statistics."""

from __future__ import annotations

import json
import math
from typing import Any

from rich.console import Group
from rich.table import Table
from rich.text import Text

from ragmon.ab.compare import AbResult

FORMATS = ("table", "json")


def _num(x: float) -> float | None:
    """A statistic for the JSON at full precision (the table rounds); NaN (no data) is null."""
    return x if math.isfinite(x) else None


def to_json(result: AbResult) -> str:
    o = result.options
    doc: dict[str, Any] = {
        "baseline": str(o.baseline), "candidate": str(o.candidate), "since": o.since.isoformat(),
        "until": o.until.isoformat(), "judge_fingerprint": result.judge_fingerprint, "decision": result.decision,
        "exit_code": result.exit_code, "too_small": list(result.too_small),
        "cohort": [t.isoformat() for t in result.cohort] if result.cohort else None,
        "empty_arms": list(result.empty_arms),
        "parameters": {"join_wait_seconds": o.join_wait_seconds, "reformulation_seconds": o.reformulation_seconds,
                       "min_per_arm": o.min_per_arm, "max_rate_harm": o.max_rate_harm,
                       "max_latency_increase_ms": o.max_latency_increase_ms, "max_quality_drop": o.max_quality_drop,
                       "max_feedback_drop": o.max_feedback_drop, "confidence": o.confidence},
        "strata": [{
            "stratum": s.stratum, "n_baseline": s.n_baseline, "n_candidate": s.n_candidate, "decision": s.decision,
            "reasons": list(s.reasons),
            "measures": [{"name": m.name, "status": m.status, "baseline": _num(m.delta.baseline),
                          "candidate": _num(m.delta.candidate), "delta": _num(m.delta.delta),
                          "low": _num(m.delta.low), "high": _num(m.delta.high), "tolerance": m.tolerance,
                          "n_baseline": m.delta.n_baseline, "n_candidate": m.delta.n_candidate}
                         for m in s.measures],
        } for s in result.strata],
    }
    return json.dumps(doc, indent=2) + "\n"


def rich_renderable(result: AbResult) -> Group:
    o = result.options
    head = Text(f"A/B: {o.candidate} vs {o.baseline}, {o.since:%Y-%m-%d %H:%M} – {o.until:%Y-%m-%d %H:%M} UTC "
                f"(outcomes joined within {o.join_wait_seconds:g}s); {o.confidence:.0%} intervals of candidate − "
                "baseline")
    table = Table("stratum", "n base/cand", "verdict", "reformulated", "citation opened", "escalated", "resolved",
                  "latency ms", "faithfulness", "why")
    shown = ("reformulated", "citation_opened", "escalated", "resolved", "latency_ms", "faithfulness")
    for s in result.strata:
        by = {m.name: m for m in s.measures}
        cells = []
        for name in shown:
            m = by[name]
            if m.status == "no_data":
                cells.append("-")
                continue
            style = {"harm": "red", "ok": "green"}.get(m.status, "yellow")
            fmt = "{:+.1f}" if name == "latency_ms" else "{:+.3f}"
            cells.append(Text(f"{fmt.format(m.delta.delta)} [{fmt.format(m.delta.low)}, {fmt.format(m.delta.high)}]",
                              style=style))
        verdict_style = {"promote": "green", "reject": "red"}.get(s.decision, "yellow")
        table.add_row(s.stratum, f"{s.n_baseline}/{s.n_candidate}", Text(s.decision, style=verdict_style), *cells,
                      "; ".join(s.reasons))
    if result.cohort:
        head.append(f"\nthe cohort's traces span {result.cohort[0]:%Y-%m-%d %H:%M} – {result.cohort[1]:%Y-%m-%d %H:%M} "
                    "UTC: the baseline is compared over the same span")
    tail = f"verdict: {result.decision.upper()} (exit code {result.exit_code})"
    if result.empty_arms:
        tail += (f"; no traces at all for {' and '.join(result.empty_arms)} in the window: check the name, version "
                 "and variant (`ragmon store status`, the console's traces page)")
    if result.too_small:
        tail += f"; the cohort is still too small in {', '.join(result.too_small)} (min {o.min_per_arm} per arm)"
    return Group(head, table, Text(tail))
