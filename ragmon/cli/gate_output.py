"""What ``ragmon gate`` prints once a run is done: the tables (or the JSON, or the Markdown), the notes, the
comparison with a baseline artifact, the artifact's path and the verdict line.

Owns ``GateRun`` (a completed run, as the report reads it), the notes a run earns and the three output formats.
Must not run a case, load an input or write a file: the command has written the run artifact before it prints.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ragmon.cli.common import UNCUT_WIDTH, err_console
from ragmon.cli.gate_generation import generation_notes, judge_line
from ragmon.gate.compare import Comparison
from ragmon.gate.generation_report import GenerationResult, render_generation_markdown, render_generation_table
from ragmon.gate.leaks import LeakApproval
from ragmon.gate.report import GateResult, render_json, render_markdown, render_table, small_strata_notes
from ragmon.golden_files import GoldenFile


class Format(StrEnum):
    table = "table"
    json = "json"
    markdown = "markdown"


@dataclass(frozen=True)
class GateRun:
    """A completed gate run: its inputs, its results and the artifact written for it."""

    golden: GoldenFile
    set_name: str
    runs: list[Any]
    result: GateResult
    gen_result: GenerationResult | None
    gen_section: dict[str, Any] | None
    content: dict[str, Any]  # the run artifact as written
    comparison: Comparison | None
    path: Path  # where the artifact was written
    retriever_corpus: str | None
    prior: int  # earlier runs of this golden set from the same artifact directory
    approval: LeakApproval | None

    @property
    def passed(self) -> bool:
        """Every stratum met every retrieval threshold, and every generation threshold when generation ran."""
        return self.result.passed and (self.gen_result is None or self.gen_result.passed)


def print_report(run: GateRun, fmt: Format) -> None:
    """Print the run in ``fmt``: JSON alone on stdout; a table or Markdown with the summary, notes, comparison,
    artifact and verdict lines after it (on stdout for a table, on stderr for Markdown)."""
    notes = _notes(run)
    out_console = _out_console(fmt)
    if fmt == Format.json:
        _print_json(out_console, run, notes)
        return
    log = out_console if fmt == Format.table else err_console
    _print_tables(out_console, run, fmt)
    log.print(_summary(run), markup=False, highlight=False)
    if run.gen_section is not None:
        log.print(judge_line(run.gen_section), markup=False, highlight=False, soft_wrap=True)
    for note in notes:
        log.print(f"note: {note}", markup=False, highlight=False, soft_wrap=True)
    if run.comparison is not None:
        _print_comparison(log, run.comparison, run.content["parameters"])
    log.print(f"artifact: {run.path}", markup=False, highlight=False, soft_wrap=True)
    log.print(_verdict(run.result, run.gen_result), markup=False, highlight=False, soft_wrap=True)


def _out_console(fmt: Format) -> Console:
    # as wide as needed when piped (CI logs, files): the 12-column table is never folded or cut
    return Console(width=None if sys.stdout.isatty() else UNCUT_WIDTH, highlight=False, soft_wrap=fmt != Format.table)


def _print_json(out_console: Console, run: GateRun, notes: list[str]) -> None:
    comparison = run.comparison
    payload = {**run.result.as_dict(), "artifact": str(run.path), "golden": run.content["golden"], "notes": notes,
               "leaks": run.content["leaks"], "comparison": comparison.as_dict() if comparison else None}  # fmt: skip
    if run.gen_result is not None:
        payload |= {"passed": run.passed, "generation": run.gen_result.as_dict()}
    out_console.print(render_json(payload), markup=False, highlight=False)


def _print_tables(out_console: Console, run: GateRun, fmt: Format) -> None:
    """The retrieval table, and the generation table when generation ran: rich tables, or Markdown."""
    if fmt == Format.table:
        out_console.print(render_table(run.result))
        if run.gen_result is not None:
            out_console.print(render_generation_table(run.gen_result))
        return
    out_console.print(render_markdown(run.result), markup=False, highlight=False, end="")
    if run.gen_result is not None:
        out_console.print("\n" + render_generation_markdown(run.gen_result), markup=False, highlight=False, end="")


def _summary(run: GateRun) -> str:
    excluded = sum(1 for r in run.runs if r.excluded)
    return (f"{len(run.runs)} cases: {len(run.runs) - excluded} scored, {excluded} excluded (expected behaviour is "
            f"not 'answer'); {run.set_name} set {run.golden.name!r} version {run.golden.version}")  # fmt: skip


def _print_comparison(log: Console, comparison: Comparison, parameters: dict[str, Any]) -> None:
    """The baseline's parameters when they differ from this run's, the largest changes and the counts."""
    before = comparison.parameters_before
    if before != parameters:
        log.print("baseline parameters: " + ", ".join(f"{k}={v}" for k, v in sorted(before.items())),
                  markup=False, highlight=False, soft_wrap=True)  # fmt: skip
    if comparison.golden_differs:
        log.print("warning: golden sets differ; only cases present in both runs are diffed", markup=False)
    if comparison.gains or comparison.losses:
        log.print(_comparison_table(comparison))
    log.print(f"{comparison.unchanged} case(s) unchanged; only in baseline: "
              f"{len(comparison.only_in_baseline)}, "
              f"only in this run: {len(comparison.only_in_current)}", markup=False)  # fmt: skip


def _comparison_table(comparison: Comparison) -> Table:
    table = Table(title="largest changes per query (vs baseline)", title_justify="left")
    for header in ("", "case", "stratum", "Δcoverage@k", "ΔRR@k", "ΔnDCG@k", "note"):
        table.add_column(header, no_wrap=True)
    for label, rows in (("gain", comparison.gains), ("loss", comparison.losses)):
        for d in rows:
            note = d.error_after and f"error now: {d.error_after[:60]}" or (d.error_before and "error before") or ""
            style = "green" if label == "gain" else "red"
            table.add_row(f"[{style}]{label}[/]", escape(d.case_id), escape(d.category),
                          *(f"{d.delta[m]:+.3f}" for m in ("recall_at_k", "reciprocal_rank_at_k", "ndcg_at_k")),
                          escape(note))  # fmt: skip
    return table


def _notes(run: GateRun) -> list[str]:
    """Every note the run earns: inputs, cases, small strata, leaks and generation."""
    notes = (_input_notes(run.golden, run.runs, run.retriever_corpus, run.set_name, run.prior)
             + small_strata_notes(run.result) + _leak_notes(run.runs, run.approval))
    if run.gen_section is not None:
        notes += generation_notes(run.gen_section)
    return notes


def _input_notes(golden: GoldenFile, runs: list[Any], retriever_corpus: str | None, set_name: str,
                 prior: int) -> list[str]:
    notes = []
    snapshots = sorted({c.corpus_snapshot for c in golden.cases if c.corpus_snapshot})
    if retriever_corpus and snapshots and retriever_corpus not in snapshots:
        notes.append(f"corpus drift: the retriever serves snapshot {retriever_corpus!r} but the golden cases were "
                     f"adjudicated against {', '.join(snapshots)}; failures may be stale labels, "
                     "not regressions")  # fmt: skip
    if set_name == "release" and prior:
        notes.append(f"the release set has been run {prior} time(s) before from this artifact directory; each run "
                     "you tune against makes it less of a held-out test")  # fmt: skip
    for run in runs:
        if run.error:
            notes.append(f"case {run.case_id!r}: {run.error} (scored as retrieving nothing)")
        elif run.returned_more:
            notes.append(f"case {run.case_id!r}: the retriever returned more than the {len(run.ranking)} asked; "
                         "the extra results were not scored" + (", but were checked for permission leaks"
                                                                  if run.leak_checked else ""))  # fmt: skip
    return notes


def _leak_notes(runs: list[Any], approval: LeakApproval | None) -> list[str]:
    """One line per leaking case (chunk ids and tenants, never text), and the sign-off when there is one."""
    notes = [f"case {r.case_id!r} (user tenant {r.tenant!r}): permission leak: "
             + ", ".join(f"{c.chunk_id} (tenant {c.tenant!r})" for c in r.leaks) for r in runs if r.leaks]
    if approval is not None:
        state = "leaks allowed" if notes else "no leak found; the approval is recorded anyway"
        notes.append(f"--allow-leaks: {state} by {approval.approver!r}: {approval.reason}")
    return notes


def _verdict(result: GateResult, gen_result: GenerationResult | None) -> str:
    failures: dict[str, list[str]] = {}
    for row in (*result.rows, *(gen_result.rows if gen_result is not None else ())):
        if row.failures:
            failures.setdefault(row.stratum, []).extend(row.failures)
    few = [row.stratum for row in result.rows if row.too_few]
    if not failures:
        if few:
            return (f"PASS: every stratum gated met every threshold; {', '.join(few)} missed with too few cases to "
                    "gate (--min-cases): add cases")
        return "PASS: every stratum met every threshold"
    return "FAIL: " + ", ".join(f"{stratum} ({', '.join(names)})" for stratum, names in failures.items())
