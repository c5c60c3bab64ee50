"""Rendering a ``ComparisonResult``: a rich table for the terminal, markdown, a self-contained HTML page, JSON.

All four render the layout of ``sections``. Question text and chunk ids come from production traffic and
are untrusted: rich cells are ``Text`` (never markup), markdown cells are escaped (pipes, HTML, emphasis), and
HTML escapes every value; the page has no script and no external resource.
"""

from __future__ import annotations

import html
import io
import json
import re
from typing import Literal

from rich.console import Console, Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from ragmon.shadow.result import ComparisonResult
from ragmon.shadow.sections import (
    example_groups,
    example_rows,
    example_title,
    sections,
    summary_lines,
    to_data,
)

Format = Literal["table", "markdown", "html", "json"]
FORMATS = ("table", "markdown", "html", "json")
_VERDICT_STYLE = {"promote": "bold green", "hold": "bold yellow", "reject": "bold red"}


def render(result: ComparisonResult, fmt: str) -> str:
    if fmt == "json":
        return render_json(result)
    if fmt == "markdown":
        return render_markdown(result)
    if fmt == "html":
        return render_html(result)
    if fmt == "table":
        # recorded only: printing as well would put the whole report on stdout even with --out
        console = Console(record=True, width=160, force_terminal=False, color_system=None, file=io.StringIO())
        console.print(rich_renderable(result))
        return console.export_text()
    raise ValueError(f"unknown format {fmt!r}; use one of {', '.join(FORMATS)}")


def render_json(result: ComparisonResult) -> str:
    return json.dumps(to_data(result), indent=2, ensure_ascii=False, allow_nan=False) + "\n"


def rich_renderable(result: ComparisonResult) -> Group:
    parts: list = []
    head = Text()
    for line in summary_lines(result)[:-1]:
        head.append(line + "\n")
    head.append("verdict: ")
    head.append(result.verdict.decision.upper(), style=_VERDICT_STYLE[result.verdict.decision])
    head.append(f" (exit code {result.exit_code}) — {'; '.join(result.verdict.reasons)}")
    parts.append(Panel(head, title=Text("ragmon shadow compare"), expand=False))
    if result.notices:
        parts.append(Text("Notices", style="bold"))
        for notice in result.notices:
            parts.append(Text(f"  • {notice}"))
    for section in sections(result):
        table = Table(title=Text(section.title, style="bold"), caption=Text(section.note) if section.note else None,
                      show_lines=False, expand=False)
        for header in section.headers:
            table.add_column(Text(header), overflow="fold")
        for row in section.rows:
            cells = [Text(c) for c in row]
            if section.title.startswith("Verdict"):
                cells[2].stylize(_VERDICT_STYLE.get(row[2], ""))
            table.add_row(*cells)
        parts.append(table)
    for title, examples in example_groups(result):
        parts.append(Text(title, style="bold"))
        if not examples:
            parts.append(Text("  (none)"))
        for e in examples:
            table = Table(title=Text(example_title("", e).lstrip(" ·")), caption=Text(f"question: {e.question}"),
                          expand=False)
            for header in ("rank", f"baseline {result.baseline.label}", f"candidate {result.candidate.label}"):
                table.add_column(Text(header), overflow="fold")
            for row in example_rows(e):
                table.add_row(*(Text(c) for c in row))
            parts.append(table)
    return Group(*parts)


_MD_SPECIAL = re.compile(r"([\\`*_\[\]|~])")


def md(text: str) -> str:
    """Escape untrusted text for a markdown table cell or line: HTML, emphasis, links, pipes, newlines."""
    text = html.escape(" ".join(text.split()), quote=False)
    return _MD_SPECIAL.sub(r"\\\1", text)


def render_markdown(result: ComparisonResult) -> str:
    lines = ["# Shadow comparison", ""]
    lines += [f"- {md(line)}" for line in summary_lines(result)]
    if result.notices:
        lines += ["", "## Notices", ""] + [f"- {md(n)}" for n in result.notices]
    for section in sections(result):
        lines += ["", f"## {md(section.title)}", ""]
        lines.append("| " + " | ".join(md(h) for h in section.headers) + " |")
        lines.append("|" + "---|" * len(section.headers))
        lines += ["| " + " | ".join(md(c) for c in row) + " |" for row in section.rows]
        if section.note:
            lines += ["", f"_{md(section.note)}_"]
    for title, examples in example_groups(result):
        lines += ["", f"## {md(title)}", ""]
        if not examples:
            lines.append("(none)")
        for e in examples:
            lines += [f"### {md(example_title('', e).lstrip(' ·'))}", "", f"> {md(e.question)}", "",
                      f"| rank | baseline {md(result.baseline.label)} | candidate {md(result.candidate.label)} |",
                      "|---|---|---|"]
            lines += ["| " + " | ".join(md(c) for c in row) + " |" for row in example_rows(e)]
            lines.append("")
    return "\n".join(lines).rstrip() + "\n"


_CSS = """\
body{font:14px/1.4 system-ui,sans-serif;margin:2em;color:#222}table{border-collapse:collapse;margin:.5em 0 1.5em}
th,td{border:1px solid #ccc;padding:3px 8px;text-align:left;vertical-align:top}th{background:#f3f3f3}
.promote{color:#137333;font-weight:bold}.hold{color:#b06000;font-weight:bold}.reject{color:#c5221f;font-weight:bold}
caption{caption-side:bottom;font-size:12px;color:#555;text-align:left}blockquote{color:#444}"""


def render_html(result: ComparisonResult) -> str:
    e = html.escape
    out = ["<!doctype html>", '<html lang="en"><head><meta charset="utf-8">',
           '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; style-src \'unsafe-inline\'">',
           f"<title>{e(f'shadow comparison {result.baseline.label} vs {result.candidate.label}')}</title>",
           f"<style>{_CSS}</style></head><body>", "<h1>Shadow comparison</h1>", "<ul>"]
    out += [f"<li>{e(line)}</li>" for line in summary_lines(result)[:-1]]
    d = result.verdict.decision
    out.append(f'<li>verdict: <span class="{e(d)}">{e(d.upper())}</span> (exit code {result.exit_code}) — '
               f"{e('; '.join(result.verdict.reasons))}</li></ul>")
    if result.notices:
        out.append("<h2>Notices</h2><ul>" + "".join(f"<li>{e(n)}</li>" for n in result.notices) + "</ul>")
    for section in sections(result):
        out.append(f"<h2>{e(section.title)}</h2><table>")
        if section.note:
            out.append(f"<caption>{e(section.note)}</caption>")
        out.append("<tr>" + "".join(f"<th>{e(h)}</th>" for h in section.headers) + "</tr>")
        for row in section.rows:
            cells = []
            for i, c in enumerate(row):
                cls = f' class="{e(c)}"' if section.title.startswith("Verdict") and i == 2 else ""
                cells.append(f"<td{cls}>{e(c)}</td>")
            out.append("<tr>" + "".join(cells) + "</tr>")
        out.append("</table>")
    for title, examples in example_groups(result):
        out.append(f"<h2>{e(title)}</h2>")
        if not examples:
            out.append("<p>(none)</p>")
        for ex in examples:
            out.append(f"<h3>{e(example_title('', ex).lstrip(' ·'))}</h3><blockquote>{e(ex.question)}</blockquote>")
            out.append(f"<table><tr><th>rank</th><th>baseline {e(result.baseline.label)}</th>"
                       f"<th>candidate {e(result.candidate.label)}</th></tr>")
            out += ["<tr>" + "".join(f"<td>{e(c)}</td>" for c in row) + "</tr>" for row in example_rows(ex)]
            out.append("</table>")
    out.append("</body></html>")
    return "\n".join(out) + "\n"
