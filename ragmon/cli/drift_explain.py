"""``ragmon drift explain``: what changed between a drift check's windows, per dimension of the traces
(``ragmon.drift.explain.explain``). Owns the options, the table and the JSON; the decomposition is the drift
package's."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from ragmon.cli.common import console, fail, settings_of
from ragmon.cli.drift_applied import applied_drift_settings
from ragmon.cli.options import FormatOption, check_format, parse_when


def explain(
    ctx: typer.Context,
    group: Annotated[str, typer.Option("--group", help="The group, as retriever@version/variant/stratum (e.g. "
                                       "hybrid@v1/production/billing): the alert's retriever, variant and stratum.")],
    feature: Annotated[str, typer.Option("--feature", help="The drifted feature (a feature of the traces, e.g. "
                                         "top1_score).")] = "top1_score",
    at: Annotated[str | None, typer.Option(
        "--at", help="Explain the check stored at or before this time ('6h' = six hours ago, or ISO 8601); default: "
        "the latest stored check of the group and feature (with none stored: now).", show_default=False)] = None,
    seed: Annotated[int, typer.Option(help="Seed of the bootstrap (same seed, same intervals).")] = 0,
    output: FormatOption = "table",
) -> None:
    """Say what changed: split the change of the feature's mean between the check's reference and current windows,
    for each dimension the traces carry (document, source, corpus snapshot, index version, retriever parameters,
    reranker, model, prompt, question type, question, tenant, where each question was answered from before), into
    a change of the mix (traffic moved to a worse segment) and a change within segments (the same segment got
    worse), and rank the dimensions by how much of the change one segment of theirs explains, with 95% intervals.
    Uses the windows of the daemon's drift check (its stored settings). Reads only. See docs/drift.md, "What
    changed".
    """
    from ragmon.cli.store_open import open_store
    from ragmon.drift.explain.explain_run import parse_group, run_explain

    output = check_format(output)
    try:
        parsed = parse_group(group)
    except ValueError as exc:
        raise fail(f"--group: {exc}") from None
    now = datetime.now(UTC)
    when = parse_when(at, now, "--at") if at is not None else None
    settings = settings_of(ctx)
    store = open_store(settings)
    drift_settings = applied_drift_settings(store, settings.drift)
    try:
        result = run_explain(store, drift_settings, parsed, feature, when, now=now, seed=seed)
    except ValueError as exc:
        raise fail(f"--feature: {exc}") from None
    if result.explanation.n_current == 0 or result.explanation.n_reference == 0:
        raise fail(f"no traces of {group} with a finite {feature} in the "
                   f"{'current' if result.explanation.n_current == 0 else 'reference'} window of the check at "
                   f"{result.checked_at:%Y-%m-%d %H:%M} UTC: nothing to explain")
    if output == "json":
        console.print_json(json.dumps(as_json(result)))
        return
    _print(result)


def _num(x: float) -> float | None:
    return x if math.isfinite(x) else None


def _interval(i: Any) -> dict[str, float | None]:
    return {"estimate": _num(i.estimate), "low": _num(i.low), "high": _num(i.high)}


def as_json(result: Any) -> dict[str, Any]:
    """The explanation as plain data (NaN as null)."""
    e = result.explanation
    w = result.window_plan.windows
    check = result.check or {}
    return {
        "group": {"retriever": result.group.retriever, "variant": result.group.variant,
                  "stratum": result.group.stratum},
        "feature": result.feature, "checked_at": result.checked_at.isoformat(),
        "check_id": check.get("check_id"),
        "current_window": w.current.describe(), "reference_window": w.reference.describe(),
        "n_reference": e.n_reference, "n_current": e.n_current,
        "mean_reference": _num(e.mean_reference), "mean_current": _num(e.mean_current), "delta": _interval(e.delta),
        "method": e.method, "stands_out": e.stands_out,
        "dimensions": [{
            "rank": rank, "dimension": d.dimension, "description": d.description, "score": _num(d.score),
            "delta": _num(d.delta), "mix": _interval(d.mix), "within": _interval(d.within),
            "segments_seen": d.n_segments,
            "top_segments": [{
                "value": s.value, "label": s.label, "n_reference": s.n_reference, "n_current": s.n_current,
                "weight_reference": _num(s.weight_reference), "weight_current": _num(s.weight_current),
                "mean_reference": _num(s.mean_reference), "mean_current": _num(s.mean_current),
                "mix": _num(s.mix), "within": _num(s.within), "explained": _interval(s.explained),
                "excess": _interval(s.excess)} for s in d.segments]}
            for rank, d in enumerate(e.dimensions, start=1)],
    }


def _pct(i: Any) -> str:
    if not math.isfinite(i.estimate):
        return "–"
    return f"{i.estimate:.0%} [{i.low:.0%}, {i.high:.0%}]" if math.isfinite(i.low) else f"{i.estimate:.0%}"


def _print(result: Any) -> None:
    e = result.explanation
    w = result.window_plan.windows
    console.print(
        f"[bold]{escape(result.feature)}[/] of {escape(result.group.retriever)}/{escape(result.group.variant)}/"
        f"{escape(result.group.stratum)}: mean {e.mean_reference:.4g} → {e.mean_current:.4g} "
        f"(Δ {e.delta.estimate:+.4g}, 95% [{e.delta.low:+.4g}, {e.delta.high:+.4g}]), "
        f"{e.n_reference:,} reference and {e.n_current:,} current traces\n"
        f"current {escape(w.current.describe())}; reference {escape(w.reference.describe())}",
        highlight=False, soft_wrap=True)
    table = Table("#", "dimension", "top segment", "weight ref → cur", "mean ref → cur", "explains",
                  "mix", "within", title="what changed (most explaining first)")
    for rank, d in enumerate(e.dimensions, start=1):
        top = d.top
        if top is None or not math.isfinite(d.score):
            table.add_row(str(rank), escape(d.dimension), "(one value in both windows)", "", "", "", "", "")
            continue
        mean = lambda x: f"{x:.3f}" if math.isfinite(x) else "absent"  # noqa: E731
        table.add_row(
            str(rank), escape(d.dimension), escape(_short(top.label)),
            f"{top.weight_reference:.1%} → {top.weight_current:.1%}",
            f"{mean(top.mean_reference)} → {mean(top.mean_current)}", _pct(top.explained),
            f"{d.mix.estimate:+.4f}", f"{d.within.estimate:+.4f}")
    console.print(table)
    if not e.stands_out:
        console.print("[bold]No dimension stands out[/]: the best scores no higher than traffic without an incident "
                      "does by chance; the change is spread evenly over every dimension the traces carry (or lies in "
                      "one they do not).", highlight=False, soft_wrap=True)
    console.print("explains: the share of Δ undone had that segment kept its reference weight and mean; mix + within "
                  "= Δ (Kitagawa). Ranked by how far it exceeds the segment's reference weight (a change spread "
                  "evenly explains no more than that), lower 95% bound.", highlight=False, soft_wrap=True)


def _short(text: str, limit: int = 60) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
