"""Rendering a stored drift check: a rich terminal table and a self-contained HTML page.

The HTML page draws, for every drifted feature, the reference and current distributions overlaid (hand-made
inline SVG from the stored quantile sketches; rates as two bars). Every piece of text that came from data
(retriever, stratum, feature names) is HTML-escaped; the page loads nothing from the network.
"""

from __future__ import annotations

import html
import json
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from rich import box
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from ragmon.drift.check.queries import DriftStore, check_rows
from ragmon.drift.method.summary import LEVELS
from ragmon.stats.shift import cdf_from_quantiles


def load_check(store: DriftStore, check_id: str | None = None) -> list[dict[str, Any]]:
    """Rows of one check (default: the latest), sorted drifted first; ``details`` parsed."""
    rows = check_rows(store, check_id)
    for row in rows:
        row["details"] = json.loads(row["details"] or "{}")
    return sort_rows(rows)


def sort_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Persistent drift first, then drifted, then by group, feature and test."""
    rows.sort(key=lambda r: (-int(r["persistent"]), -int(r["drifted"]), r["retriever_name"], r["variant"],
                             r["stratum"], r["feature"], r["test"]))
    return rows


def result_rows(result: Any) -> list[dict[str, Any]]:
    """The rows ``load_check`` would return for a ``CheckResult`` that was not stored (``drift check --at``)."""
    from ragmon.drift.check.result import details_json

    rows = []
    for r in result.results:
        g = r.group
        rows.append({
            "check_id": r.check_id, "checked_at": r.checked_at, "retriever_name": g.retriever_name,
            "retriever_version": g.retriever_version, "variant": g.variant, "stratum": g.stratum,
            "feature": r.feature, "test": r.test, "statistic": r.statistic, "p_value": r.p_value,
            "p_adjusted": r.p_adjusted, "effect": r.effect, "threshold": r.threshold,
            "effect_threshold": r.effect_threshold, "drifted": int(r.drifted), "n_reference": r.reference.n,
            "n_current": r.current.n, "details": json.loads(details_json(r)), "status": r.status,
            "pooled_windows": r.pooled, "cusum": r.cusum, "cusum_threshold": r.cusum_threshold,
            "persistent": int(r.persistent)})
    return sort_rows(rows)


def json_rows(rows: Sequence[dict[str, Any]]) -> str:
    """Rows as JSON: times in ISO 8601, non-finite numbers as null."""
    def clean(value: Any) -> Any:
        if isinstance(value, float) and not math.isfinite(value):
            return None
        if hasattr(value, "isoformat"):
            return value.isoformat()
        return value
    return json.dumps([{k: clean(v) for k, v in row.items()} for row in rows], ensure_ascii=False, indent=1)


def _fmt(x: Any, spec: str = ".3g") -> str:
    return "–" if x is None or (isinstance(x, float) and not math.isfinite(x)) else format(x, spec)


def _retriever(row: dict[str, Any]) -> str:
    return f"{row['retriever_name']}@{row['retriever_version']}"


def terminal_table(rows: Sequence[dict[str, Any]], *, only_drifted: bool = False) -> RenderableType:
    """One table per (retriever, variant, stratum) group, so it fits an 80-column terminal."""
    title = f"drift check {rows[0]['check_id'][:12]} at {rows[0]['checked_at']:%Y-%m-%d %H:%M} UTC" if rows else "drift"
    tables: dict[str, Table] = {}
    for r in rows:
        if only_drifted and not r["drifted"]:
            continue
        group = f"{_retriever(r)} · {r['variant']} · stratum {r['stratum']}"
        table = tables.get(group)
        if table is None:
            table = tables[group] = Table(title=_escape_markup(group), title_justify="left", header_style="bold",
                                          box=box.SIMPLE_HEAD, pad_edge=False)
            table.add_column("verdict", no_wrap=True)
            table.add_column("feature", no_wrap=True)
            table.add_column("test", no_wrap=True)
            for name in ("n ref/cur", "z", "p adj", "effect/thr", "cusum/h"):
                table.add_column(name, justify="right", no_wrap=True)
        d = r["details"]
        status = r.get("status") or d.get("status")
        verdict = ("[bold red]PERSISTENT[/]" if r.get("persistent") else "[bold red]DRIFT[/]" if r["drifted"] else
                   "[dim]too few[/]" if status == "insufficient_data" else "ok")
        pooled = int(r.get("pooled_windows") or 1)
        cusum = (f"{_fmt(r.get('cusum'), '.2g')}/{_fmt(r.get('cusum_threshold'), '.2g')}"
                 if _finite(r.get("cusum_threshold")) else "")
        table.add_row(
            verdict, _escape_markup(r["feature"]), _escape_markup(r["test"]),
            f"{r['n_reference']}/{r['n_current']}" + (f" ({pooled} windows)" if pooled > 1 else ""),
            _fmt(r["statistic"], ".2g"), _fmt(r["p_adjusted"], ".1g"),
            f"{_fmt(r['effect'], '.2g')}/{_fmt(r['effect_threshold'], 'g')}", cusum,
        )
    if not tables:
        return Group(Text(title, style="bold"), Text("no drifted feature" if only_drifted else "no tests"))
    return Group(Text(title, style="bold"), *tables.values())


def _finite(x: Any) -> bool:
    return isinstance(x, int | float) and math.isfinite(x)


def _escape_markup(text: str) -> str:
    return str(text).replace("[", r"\[")


# -- HTML ----------------------------------------------------------------------------------------------------

_W, _H, _PAD = 520, 200, 30


def histogram_svg(ref: dict[str, Any], cur: dict[str, Any], bins: int = 30) -> str:
    """Both windows' distributions overlaid, from their stored quantile sketches (inline SVG: numbers only)."""
    qr, qc = ref.get("quantiles") or [], cur.get("quantiles") or []
    if len(qr) != len(LEVELS) or len(qc) != len(LEVELS) or None in qr or None in qc:
        return "<p>no distribution stored</p>"
    lo, hi = min(qr[1], qc[1]), max(qr[-2], qc[-2])
    if not hi > lo:
        lo, hi = lo - 0.5, hi + 0.5
    edges = np.linspace(lo, hi, bins + 1)
    masses = [_bin_masses(q, edges) for q in (qr, qc)]
    top = max(float(m.max()) for m in masses) or 1.0
    bw = (_W - 2 * _PAD) / bins
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{_W}" height="{_H + 40}" role="img">']
    for mass, colour in zip(masses, ("#1f77b4", "#ff7f0e"), strict=True):
        for i, m in enumerate(mass):
            h = (_H - _PAD) * float(m) / top
            parts.append(f'<rect x="{_PAD + i * bw:.1f}" y="{_H - h:.1f}" width="{bw:.1f}" height="{h:.1f}" '
                         f'fill="{colour}" fill-opacity="0.45"/>')
    parts.append(f'<line x1="{_PAD}" y1="{_H}" x2="{_W - _PAD}" y2="{_H}" stroke="#333"/>')
    parts.append(f'<text x="{_PAD}" y="{_H + 15}" font-size="11">{lo:.4g}</text>')
    parts.append(f'<text x="{_W - _PAD}" y="{_H + 15}" font-size="11" text-anchor="end">{hi:.4g}</text>')
    parts.append(_legend(ref, cur))
    parts.append("</svg>")
    return "".join(parts)


def _bin_masses(q: Sequence[float], edges: np.ndarray) -> np.ndarray:
    """Share of the distribution in each bin; everything at or below the second edge is in the first bin and
    everything above the second-to-last in the last, so values piled at (or beyond) an end of the range — a
    judge score collapsing from 1 to 0 — show as a bar instead of vanishing."""
    cdf = cdf_from_quantiles(q, LEVELS, edges)
    cdf[0], cdf[-1] = 0.0, 1.0
    return np.clip(np.diff(cdf), 0.0, None)


def _legend(ref: dict[str, Any], cur: dict[str, Any]) -> str:
    def mean(s: dict[str, Any]) -> str:
        value = s.get("mean", s.get("rate"))
        return _fmt(value, ".4g")
    return (f'<rect x="{_PAD}" y="{_H + 24}" width="10" height="10" fill="#1f77b4" fill-opacity="0.6"/>'
            f'<text x="{_PAD + 14}" y="{_H + 33}" font-size="11">reference (n={ref.get("n")}, mean {mean(ref)})</text>'
            f'<rect x="{_W // 2}" y="{_H + 24}" width="10" height="10" fill="#ff7f0e" fill-opacity="0.6"/>'
            f'<text x="{_W // 2 + 14}" y="{_H + 33}" font-size="11">'
            f'current (n={cur.get("n")}, mean {mean(cur)})</text>')


def rate_svg(ref: dict[str, Any], cur: dict[str, Any]) -> str:
    """Both windows' rates as two bars (inline SVG: numbers only)."""
    rates = [s.get("rate") or 0.0 for s in (ref, cur)]
    top = max(rates) or 1.0
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{_W}" height="{_H + 40}" role="img">']
    for i, (rate, colour) in enumerate(zip(rates, ("#1f77b4", "#ff7f0e"), strict=True)):
        h = (_H - _PAD) * rate / top
        x = _PAD + 60 + i * 160
        parts.append(f'<rect x="{x}" y="{_H - h:.1f}" width="100" height="{h:.1f}" fill="{colour}" '
                     'fill-opacity="0.6"/>')
        parts.append(f'<text x="{x + 50}" y="{_H - h - 4:.1f}" font-size="11" text-anchor="middle">{rate:.2%}</text>')
    parts.append(f'<line x1="{_PAD}" y1="{_H}" x2="{_W - _PAD}" y2="{_H}" stroke="#333"/>')
    parts.append(_legend(ref, cur))
    parts.append("</svg>")
    return "".join(parts)


def html_report(rows: Sequence[dict[str, Any]]) -> str:
    """A self-contained HTML page for one check."""
    e = html.escape
    head = rows[0] if rows else None
    title = f"ragmon drift check {head['check_id'][:12]}" if head else "ragmon drift check (none stored)"
    out = [f"<!doctype html><html><head><meta charset='utf-8'><title>{e(title)}</title><style>"
           "body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}td,th{border:1px solid #ccc;"
           "padding:2px 6px;font-size:13px}.drift{background:#fdd}section{margin:1.5em 0}</style></head><body>",
           f"<h1>{e(title)}</h1>"]
    if head:
        d = head["details"]
        out.append(f"<p>checked at {e(str(head['checked_at']))} UTC · reference: {e(d.get('reference_window', ''))}"
                   f" · current: {e(d.get('current_window', ''))}</p>")
    seen: set[tuple[str, ...]] = set()
    drifted = [r for r in rows if r["drifted"] or r.get("persistent")]
    persistent = sum(1 for r in rows if r.get("persistent"))
    out.append(f"<h2>{len(drifted)} drifted of {len(rows)} tests ({persistent} persistent)</h2>")
    for r in drifted:
        key = (_retriever(r), r["variant"], r["stratum"], r["feature"], r["details"].get("judge_fingerprint", ""))
        if key in seen:
            continue
        seen.add(key)
        d = r["details"]
        graph = (histogram_svg(d["reference"], d["current"]) if "quantiles" in d.get("reference", {})
                 else rate_svg(d.get("reference", {}), d.get("current", {})))
        out.append(f"<section><h3>{e(r['feature'])} · {e(key[0])} · {e(r['variant'])} · stratum {e(r['stratum'])}"
                   f"</h3>{graph}</section>")
    out.append("<h2>All tests</h2><table><tr>" + "".join(
        f"<th>{h}</th>" for h in ("retriever", "variant", "stratum", "feature", "test", "n ref", "n cur",
                                  "windows pooled", "statistic", "p adjusted", "effect", "effect threshold", "α",
                                  "CUSUM", "CUSUM threshold", "verdict", "why")) + "</tr>")
    for r in rows:
        verdict = "PERSISTENT" if r.get("persistent") else "DRIFT" if r["drifted"] else "ok"
        cells = (_retriever(r), r["variant"], r["stratum"], r["feature"], r["test"], r["n_reference"], r["n_current"],
                 r.get("pooled_windows") or 1, _fmt(r["statistic"]), _fmt(r["p_adjusted"]), _fmt(r["effect"]),
                 _fmt(r["effect_threshold"], "g"), _fmt(r["threshold"], "g"), _fmt(r.get("cusum")),
                 _fmt(r.get("cusum_threshold")), verdict, r["details"].get("reason", ""))
        cls = ' class="drift"' if verdict != "ok" else ""
        out.append(f"<tr{cls}>" + "".join(f"<td>{e(str(c))}</td>" for c in cells) + "</tr>")
    out.append("</table></body></html>")
    return "\n".join(out)
