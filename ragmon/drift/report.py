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

from ragmon.drift.stats import cdf_from_quantiles
from ragmon.drift.summary import LEVELS

COLUMNS = ("check_id", "checked_at", "retriever_name", "retriever_version", "variant", "category", "feature", "test",
           "statistic", "p_value", "p_adjusted", "effect", "threshold", "effect_threshold", "drifted", "n_reference",
           "n_current", "details")


def load_check(store: Any, check_id: str | None = None) -> list[dict[str, Any]]:
    """Rows of one check (default: the latest), sorted drifted first; ``details`` parsed."""
    table = store.table("drift_checks")
    where = ("check_id = {id:String}" if check_id else
             f"check_id = (SELECT argMax(check_id, checked_at) FROM {table})")
    rows = store.query_rows(f"SELECT {', '.join(COLUMNS)} FROM {table} WHERE {where}", {"id": check_id or ""})
    for row in rows:
        row["details"] = json.loads(row["details"] or "{}")
    rows.sort(key=lambda r: (-int(r["drifted"]), r["retriever_name"], r["variant"], r["category"], r["feature"],
                             r["test"]))
    return rows


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
        group = f"{_retriever(r)} · {r['variant']} · stratum {r['category']}"
        table = tables.get(group)
        if table is None:
            table = tables[group] = Table(title=_escape_markup(group), title_justify="left", header_style="bold",
                                          box=box.SIMPLE_HEAD, pad_edge=False)
            table.add_column("verdict", no_wrap=True)
            table.add_column("feature", no_wrap=True)
            table.add_column("test", no_wrap=True)
            for name in ("n ref/cur", "stat", "p adj", "effect/thr"):
                table.add_column(name, justify="right", no_wrap=True)
        d = r["details"]
        verdict = ("[bold red]DRIFT[/]" if r["drifted"] else
                   "[dim]too few[/]" if d.get("status") == "insufficient_data" else "ok")
        table.add_row(
            verdict, _escape_markup(r["feature"]), _escape_markup(r["test"]), f"{r['n_reference']}/{r['n_current']}",
            _fmt(r["statistic"], ".2g"), _fmt(r["p_adjusted"], ".1g"),
            f"{_fmt(r['effect'], '.2g')}/{_fmt(r['effect_threshold'], 'g')}",
        )
    if not tables:
        return Group(Text(title, style="bold"), Text("no drifted feature" if only_drifted else "no tests"))
    return Group(Text(title, style="bold"), *tables.values())


def _escape_markup(text: str) -> str:
    return str(text).replace("[", r"\[")


# -- HTML ----------------------------------------------------------------------------------------------------

_W, _H, _PAD = 520, 200, 30


def _histogram_svg(ref: dict[str, Any], cur: dict[str, Any], bins: int = 30) -> str:
    qr, qc = ref.get("quantiles") or [], cur.get("quantiles") or []
    if len(qr) != len(LEVELS) or len(qc) != len(LEVELS) or None in qr or None in qc:
        return "<p>no distribution stored</p>"
    lo, hi = min(qr[1], qc[1]), max(qr[-2], qc[-2])
    if not hi > lo:
        lo, hi = lo - 0.5, hi + 0.5
    edges = np.linspace(lo, hi, bins + 1)
    masses = [np.diff(cdf_from_quantiles(q, LEVELS, edges)) for q in (qr, qc)]
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


def _legend(ref: dict[str, Any], cur: dict[str, Any]) -> str:
    def mean(s: dict[str, Any]) -> str:
        value = s.get("mean", s.get("rate"))
        return _fmt(value, ".4g")
    return (f'<rect x="{_PAD}" y="{_H + 24}" width="10" height="10" fill="#1f77b4" fill-opacity="0.6"/>'
            f'<text x="{_PAD + 14}" y="{_H + 33}" font-size="11">reference (n={ref.get("n")}, mean {mean(ref)})</text>'
            f'<rect x="{_W // 2}" y="{_H + 24}" width="10" height="10" fill="#ff7f0e" fill-opacity="0.6"/>'
            f'<text x="{_W // 2 + 14}" y="{_H + 33}" font-size="11">current (n={cur.get("n")}, mean {mean(cur)})</text>')


def _rate_svg(ref: dict[str, Any], cur: dict[str, Any]) -> str:
    rates = [s.get("rate") or 0.0 for s in (ref, cur)]
    top = max(rates) or 1.0
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{_W}" height="{_H + 40}" role="img">']
    for i, (rate, colour) in enumerate(zip(rates, ("#1f77b4", "#ff7f0e"), strict=True)):
        h = (_H - _PAD) * rate / top
        x = _PAD + 60 + i * 160
        parts.append(f'<rect x="{x}" y="{_H - h:.1f}" width="100" height="{h:.1f}" fill="{colour}" fill-opacity="0.6"/>')
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
    drifted = [r for r in rows if r["drifted"]]
    out.append(f"<h2>{len(drifted)} drifted of {len(rows)} tests</h2>")
    for r in drifted:
        key = (_retriever(r), r["variant"], r["category"], r["feature"], r["details"].get("judge_fingerprint", ""))
        if key in seen:
            continue
        seen.add(key)
        d = r["details"]
        graph = (_histogram_svg(d["reference"], d["current"]) if "quantiles" in d.get("reference", {})
                 else _rate_svg(d.get("reference", {}), d.get("current", {})))
        out.append(f"<section><h3>{e(r['feature'])} · {e(key[0])} · {e(r['variant'])} · stratum {e(r['category'])}"
                   f"</h3>{graph}</section>")
    out.append("<h2>All tests</h2><table><tr>" + "".join(
        f"<th>{h}</th>" for h in ("retriever", "variant", "stratum", "feature", "test", "n ref", "n cur", "statistic",
                                  "p adjusted", "effect", "effect threshold", "α", "verdict", "why")) + "</tr>")
    for r in rows:
        cells = (_retriever(r), r["variant"], r["category"], r["feature"], r["test"], r["n_reference"], r["n_current"],
                 _fmt(r["statistic"]), _fmt(r["p_adjusted"]), _fmt(r["effect"]), _fmt(r["effect_threshold"], "g"),
                 _fmt(r["threshold"], "g"), "DRIFT" if r["drifted"] else "ok", r["details"].get("reason", ""))
        cls = ' class="drift"' if r["drifted"] else ""
        out.append(f"<tr{cls}>" + "".join(f"<td>{e(str(c))}</td>" for c in cells) + "</tr>")
    out.append("</table></body></html>")
    return "\n".join(out)
