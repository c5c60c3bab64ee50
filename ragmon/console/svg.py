"""Plots the console draws on the server as inline SVG: a confidence-interval plot (one row per stratum: the
interval as a bar, the estimate as a dot, zero as a line), a statistic's history over checks against its threshold, and
stacked bars of counts over time (dead letters by reason per hour).

Owns the drawing only. Every label is escaped here (``html.escape``) because the SVG is inserted into the page as
markup; numbers are formatted, never raw. Non-finite values are left out. Must not read the store. (Both windows'
histograms of a drift check are ``ragmon.drift.check.report``'s, shared with ``drift report --html``.)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import datetime
from html import escape

ROW_H, LABEL_W, PLOT_W, PAD = 22, 220, 420, 12
LABEL_CHARS = 32
#: the least room (px) between two axis labels
MIN_TICK_GAP = 8


def _finite(*values: float | None) -> bool:
    return all(v is not None and math.isfinite(v) for v in values)


def ci_plot(rows: Sequence[tuple[str, float | None, float | None, float | None]], unit: str = "") -> str:
    """``(label, estimate, low, high)`` per row: each interval against a shared axis through zero."""
    points = [v for _, m, lo, hi in rows for v in (m, lo, hi) if _finite(v)]
    if not points:
        return '<p class="meta">no interval to plot</p>'
    lo_all, hi_all = min([*points, 0.0]), max([*points, 0.0])
    span = (hi_all - lo_all) or 1.0
    lo_all, hi_all = lo_all - span * 0.05, hi_all + span * 0.05

    def x(v: float) -> float:
        return LABEL_W + PAD + (v - lo_all) / (hi_all - lo_all) * (PLOT_W - 2 * PAD)

    height = ROW_H * len(rows) + 30
    out = [f'<svg class="plot ci" xmlns="http://www.w3.org/2000/svg" width="{LABEL_W + PLOT_W}" height="{height}" '
           'role="img">',
           f'<line x1="{x(0):.1f}" y1="0" x2="{x(0):.1f}" y2="{height - 24}" stroke="#888" stroke-dasharray="3,3"/>']
    for i, (label, mean, low, high) in enumerate(rows):
        y = ROW_H * i + ROW_H / 2
        short = label if len(label) <= LABEL_CHARS else label[:LABEL_CHARS - 1] + "…"
        out.append(f'<text x="{LABEL_W - 6}" y="{y + 4:.1f}" text-anchor="end">{escape(short)}</text>')
        if _finite(low, high):
            colour = "#2f855a" if low > 0 else "#c53030" if high < 0 else "#555"  # type: ignore[operator]
            out.append(f'<line x1="{x(low):.1f}" y1="{y:.1f}" x2="{x(high):.1f}" y2="{y:.1f}" stroke="{colour}" '  # type: ignore[arg-type]
                       'stroke-width="4"/>')
        if _finite(mean):
            out.append(f'<circle cx="{x(mean):.1f}" cy="{y:.1f}" r="4" fill="#1d1d1f"/>')  # type: ignore[arg-type]
    base = height - 10
    # zero always; an end of the axis only where its label cannot run into zero's (they are ~6 px a character)
    out.append(f'<text class="tick" x="{x(0.0):.1f}" y="{base}" text-anchor="middle">0{escape(unit)}</text>')
    for v, anchor in ((lo_all, "start"), (hi_all, "end")):
        label = f"{v:+.2g}{escape(unit)}"
        edge = x(v)
        near = edge + 6.5 * len(label) if anchor == "start" else edge - 6.5 * len(label)
        if abs(near - x(0.0)) >= 6.5 + MIN_TICK_GAP and (near - x(0.0)) * (edge - x(0.0)) > 0:
            out.append(f'<text class="tick" x="{edge:.1f}" y="{base}" text-anchor="{anchor}">{label}</text>')
    out.append("</svg>")
    return "".join(out)


def history_plot(values: Sequence[float], flagged: Sequence[bool], threshold: float | None,
                 first: datetime | None, last: datetime | None, width: int = 280, height: int = 64) -> str:
    """``values`` over checks, oldest left: a line through a dot per check (red: flagged), the line that pages
    (``threshold``, dashed) when there is one, the value axis from zero with its top labelled, the first and last
    check's time below. One check is a dot in the middle, never on the box's edge."""
    pts = [(i, v) for i, v in enumerate(values) if _finite(v)]
    if not pts:
        return '<span class="meta">no value yet</span>'
    top = max([v for _, v in pts] + ([threshold] if _finite(threshold) else []))  # type: ignore[list-item]
    bottom = min([0.0] + [v for _, v in pts])
    top = top + ((top - bottom) or 1.0) * 0.15
    left, right, up, down = 34, width - 6, 6, height - 16
    n = len(values) - 1

    def xy(i: int, v: float) -> tuple[float, float]:
        x = (left + right) / 2 if n == 0 else left + i / n * (right - left)
        return x, down - (v - bottom) / (top - bottom) * (down - up)

    out = [f'<svg class="plot history" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           'role="img">',
           f'<line x1="{left}" y1="{down}" x2="{right}" y2="{down}" stroke="#bbb"/>',
           f'<text x="{left - 3}" y="{down}" text-anchor="end">{bottom:.3g}</text>']
    if _finite(threshold):  # the line that pages, labelled with its value; otherwise the axis's top
        y = xy(0, threshold)[1]  # type: ignore[arg-type]
        out.append(f'<line class="threshold" x1="{left}" y1="{y:.1f}" x2="{right}" y2="{y:.1f}" stroke="#c53030" '
                   f'stroke-dasharray="4,3"><title>pages at {threshold:.4g}</title></line>'
                   f'<text x="{left - 3}" y="{y + 4:.1f}" text-anchor="end" fill="#c53030">{threshold:.3g}</text>')
    else:
        out.append(f'<text x="{left - 3}" y="{up + 8}" text-anchor="end">{top:.3g}</text>')
    if len(pts) > 1:
        line = " ".join(f"{a:.1f},{b:.1f}" for a, b in (xy(i, v) for i, v in pts))
        out.append(f'<polyline points="{line}" fill="none" stroke="#243b53" stroke-width="1.5"/>')
    for i, v in pts:
        a, b = xy(i, v)
        colour = "#c53030" if flagged[i] else "#243b53"
        out.append(f'<circle cx="{a:.1f}" cy="{b:.1f}" r="{3 if flagged[i] else 2}" fill="{colour}">'
                   f'<title>{v:.4g}</title></circle>')
    if first is not None and last is not None:
        out.append(f'<text x="{left}" y="{height - 3}">{first:%m-%d %H:%M}</text>')
        if n > 0:
            out.append(f'<text x="{right}" y="{height - 3}" text-anchor="end">{last:%m-%d %H:%M}</text>')
    out.append("</svg>")
    return "".join(out)


#: the colours of stacked series, in order (the last repeats)
PALETTE = ("#c53030", "#dd6b20", "#d69e2e", "#2f855a", "#2b6cb0", "#6b46c1", "#718096")


def stacked_bars(columns: Sequence[tuple[str, dict[str, int]]], series: Sequence[str], width: int = 720,
                 height: int = 160) -> str:
    """One bar per column (oldest first), stacked by ``series``; a legend below. Labels are escaped."""
    if not columns or not series:
        return ""
    top = max(sum(counts.values()) for _, counts in columns) or 1
    bw = (width - 2 * PAD) / len(columns)
    out = [f'<svg class="plot bars" xmlns="http://www.w3.org/2000/svg" width="{width}" '
           f'height="{height + 22 + 16 * ((len(series) + 3) // 4)}" role="img">']
    for i, (label, counts) in enumerate(columns):
        y = float(height)
        for j, name in enumerate(series):
            h = (height - PAD) * counts.get(name, 0) / top
            if h > 0:
                y -= h
                out.append(f'<rect x="{PAD + i * bw:.1f}" y="{y:.1f}" width="{max(bw - 2, 1):.1f}" height="{h:.1f}" '
                           f'fill="{PALETTE[min(j, len(PALETTE) - 1)]}"><title>{escape(label)}: '
                           f'{escape(name)} {counts.get(name, 0)}</title></rect>')
    out.append(f'<text x="{PAD}" y="{PAD - 2}">{top}</text>')
    out.append(f'<text x="{PAD}" y="{height + 14}">{escape(columns[0][0])}</text>')
    out.append(f'<text x="{width - PAD}" y="{height + 14}" text-anchor="end">{escape(columns[-1][0])}</text>')
    for j, name in enumerate(series):
        x, y = PAD + (j % 4) * (width - 2 * PAD) / 4, height + 30 + 16 * (j // 4)
        short = name if len(name) <= LABEL_CHARS else name[:LABEL_CHARS - 1] + "…"
        out.append(f'<rect x="{x:.1f}" y="{y - 9}" width="10" height="10" fill="{PALETTE[min(j, len(PALETTE) - 1)]}"/>'
                   f'<text x="{x + 14:.1f}" y="{y}">{escape(short)}</text>')
    out.append("</svg>")
    return "".join(out)
