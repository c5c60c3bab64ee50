"""Rendering a ``CoverageResult``: a rich table for the terminal, and JSON for pipelines.

Owns the layout only; every number comes from the result. Must not query or compute statistics.
"""

from __future__ import annotations

import json
import math
from typing import Any

from rich.console import Group
from rich.table import Table
from rich.text import Text

from ragmon.coverage.check import CoverageResult

FORMATS = ("table", "json")


def to_json(result: CoverageResult) -> str:
    def num(x: float) -> float | None:  # full precision: a p-value below 5e-7 is not 0 (the table rounds)
        return None if not math.isfinite(x) else x

    doc: dict[str, Any] = {
        "since": result.since.isoformat(), "until": result.until.isoformat(),
        "classifier_fingerprint": result.fingerprint, "question_types": list(result.question_types),
        "golden_cases": result.golden_cases, "untagged_golden_cases": result.untagged_cases,
        "exit_code": result.exit_code, "under_represented": list(result.under_represented()),
        "uncategorized_traffic": result.uncategorized_traffic, "notes": notes(result),
        "strata": [{
            "stratum": s.stratum, "status": s.status, "golden_cases": s.golden_cases, "traffic": s.traffic,
            "distance": num(s.distance), "g_statistic": num(s.g_statistic), "p_value": num(s.p_value),
            "cramers_v": num(s.cramers_v), "under_represented": list(s.under_represented),
            "thresholds": {"max_distance": s.thresholds.max_distance, "alpha": s.thresholds.alpha,
                           "min_traces": s.thresholds.min_traces, "min_share_gap": s.thresholds.min_share_gap},
            "types": [{"question_type": t.question_type, "golden": t.golden, "traffic": t.traffic,
                       "golden_share": num(t.golden_share), "traffic_share": num(t.traffic_share)}
                      for t in s.shares if t.golden or t.traffic],
        } for s in result.strata],
    }
    return json.dumps(doc, indent=2) + "\n"


def notes(result: CoverageResult) -> list[str]:
    """What the table leaves unsaid: traffic no stratum compared, and why."""
    out = []
    if result.uncategorized_traffic:
        out.append(f"{result.uncategorized_traffic} classified traces have no category: they are compared in 'all' "
                   "only (status no_category); give the traces a category, or add golden cases with category "
                   "'uncategorized' (as `ragmon review export --golden` writes them) to compare them as a stratum")
    return out


def _cell(x: float, spec: str) -> str:
    return format(x, spec) if math.isfinite(x) else "-"


def rich_renderable(result: CoverageResult) -> Group:
    head = Text(f"Question-type coverage {result.since:%Y-%m-%d %H:%M} – {result.until:%Y-%m-%d %H:%M} UTC, "
                f"classifier {result.fingerprint or '(no classified traffic)'}; golden set {result.golden_cases} "
                f"cases ({result.untagged_cases} without a question-type tag)")
    table = Table("stratum", "status", "golden", "traffic", "TVD", "G p-value", "Cramér's V", "under-represented")
    for s in result.strata:
        style = {"diverged": "red", "no_golden_cases": "red", "too_small": "yellow",
                 "no_category": "yellow"}.get(s.status, "green")
        gaps = {t.question_type: t.gap for t in s.shares}
        under = ", ".join(f"{t} (+{gaps[t]:.0%})" for t in s.under_represented) or "-"
        table.add_row(s.stratum, Text(s.status, style=style), str(s.golden_cases), str(s.traffic),
                      _cell(s.distance, ".2f"), _cell(s.p_value, ".2g"), _cell(s.cramers_v, ".2f"), under)
    verdict = {0: "the golden set describes live traffic", 1: "the golden set no longer describes live traffic",
               4: "too little classified traffic to say"}[result.exit_code]
    add = result.under_represented()
    tail = Text(f"{verdict} (exit code {result.exit_code})" + (f"; add cases of: {', '.join(add)}" if add else ""))
    return Group(head, table, *(Text(f"note: {n}") for n in notes(result)), tail)
