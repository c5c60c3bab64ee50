"""``ragmon gate``: the offline release gate over a golden set, for CI.

Exit codes: 0 every stratum met every threshold; 1 some stratum missed some threshold or leaked another tenant's
chunk without ``--allow-leaks``; 2 usage or input error (bad arguments, a malformed ``--allow-leaks``, malformed
golden file, unloadable retriever, refused comparison). Writes an immutable run
artifact for every completed run, passing or not.
"""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from ragmon.cli.common import UNCUT_WIDTH, err_console, fail, settings_of
from ragmon.cli.gate_generation import (
    generation_notes,
    generation_result,
    judge_line,
    prepare_generation,
    run_generation,
)
from ragmon.cli.options import check_output_dir
from ragmon.errors import ConfigError, InputError
from ragmon.gate import artifact as artifacts
from ragmon.gate.compare import Comparison, check_same_golden, compare_runs
from ragmon.gate.generation_report import (
    GenerationResult,
    GenerationThresholds,
    render_generation_markdown,
    render_generation_table,
)
from ragmon.gate.leaks import LeakApproval, LeakCheck, leak_section, parse_approval
from ragmon.gate.report import (
    Thresholds,
    build_result,
    render_json,
    render_markdown,
    render_table,
    small_strata_notes,
)
from ragmon.gate.runner import load_retriever, run_gate_cases
from ragmon.golden_files import GoldenFile, load_golden
from ragmon.metrics.permissions import LeakRule


class SetName(StrEnum):
    dev = "dev"
    release = "release"


class JudgeKind(StrEnum):
    heuristic = "heuristic"
    openai = "openai"


class Format(StrEnum):
    table = "table"
    json = "json"
    markdown = "markdown"


def _out_console(fmt: Format) -> Console:
    # as wide as needed when piped (CI logs, files): the 12-column table is never folded or cut
    return Console(width=None if sys.stdout.isatty() else UNCUT_WIDTH, highlight=False, soft_wrap=fmt != Format.table)


def _set_name(golden: GoldenFile, chosen: SetName | None) -> str:
    if chosen is not None and golden.set_name is not None and chosen.value != golden.set_name:
        raise InputError(f"--set {chosen.value} but {golden.path} declares \"set\": {golden.set_name!r}; "
                         "run the set the file says it is, or fix the file")  # fmt: skip
    name = chosen.value if chosen is not None else golden.set_name
    if name is None:
        raise InputError(f"{golden.path} does not say whether it is the dev or the release set: pass --set dev or "
                         "--set release (or add \"set\" to the file's envelope)")  # fmt: skip
    return name


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


def _notes(golden: GoldenFile, runs: list[Any], retriever_corpus: str | None, set_name: str, prior: int) -> list[str]:
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


def gate(
    ctx: typer.Context,
    golden_path: Annotated[Path, typer.Argument(
        metavar="GOLDEN.json",
        help="Golden set: a JSON array of golden-case.v1 cases, or an envelope {name, version, set, cases}.",
        show_default=False)],
    retriever: Annotated[str, typer.Option(
        "--retriever",
        help="Retriever to gate, as module:function or path/to/file.py:function. Called as f(question, k) and must "
             "return ranked chunk ids or (chunk_id, score) pairs, best first. Modules in the working directory are "
             "importable.", show_default=False)],
    k: Annotated[int, typer.Option(
        "--k",
        help="The k you actually pass to the model: coverage, hit, MRR and nDCG are computed at this cut-off.",
        show_default=False)],
    min_coverage: Annotated[float, typer.Option(
        "--min-coverage",
        help="Required. Minimum mean coverage (recall) at k, 0–1, for EVERY stratum and ALL. No default: agree it with "
             "the business before measuring.", show_default=False)],
    min_mrr: Annotated[float, typer.Option(
        "--min-mrr",
        help="Required. Minimum mean reciprocal rank within the top k, 0–1, per stratum.", show_default=False)],
    depth: Annotated[int | None, typer.Option(
        "--depth",
        help="A second, larger cut-off: recall at this depth is reported beside coverage@k (the gap is what a reranker "
             "could win). The retriever is asked for this many. Default: k.", show_default=False)] = None,
    min_ndcg: Annotated[float | None, typer.Option(
        "--min-ndcg",
        help="Optional minimum mean nDCG@k (linear gain, log2 discount, trec_eval's convention), 0–1, per stratum.",
        show_default=False)] = None,
    max_p95_ms: Annotated[float | None, typer.Option(
        "--max-p95-ms",
        help="Optional maximum p95 retriever latency per stratum, in milliseconds.", show_default=False)] = None,
    min_cases: Annotated[int | None, typer.Option(
        "--min-cases",
        help="A stratum with fewer scored cases is reported (verdict 'too few', with its coverage interval) but not "
             "gated on its own; its cases still count in ALL. Default: every stratum is gated; strata under 5 cases "
             "get a note with their 95% interval either way.", show_default=False)] = None,
    set_name: Annotated[SetName | None, typer.Option(
        "--set",
        help="Which set this is: dev (tune against it) or release (frozen, run rarely, never tuned against). Recorded "
             "in the artifact; must match the file's \"set\" if it declares one.", show_default=False)] = None,
    compare: Annotated[Path | None, typer.Option(
        "--compare", metavar="ARTIFACT",
        help="A previous run artifact: print the queries with the largest gains and losses against it. Refused when "
             "the golden set version differs.", show_default=False)] = None,
    allow_different_golden: Annotated[bool, typer.Option(
        "--allow-different-golden",
        help="Compare with --compare ARTIFACT even when its golden set version or content differs (only shared case "
             "ids are diffed).")] = False,
    compare_top: Annotated[int, typer.Option(
        "--compare-top", min=1, max=1000, help="How many gains and how many losses to list with --compare.")] = 10,
    out: Annotated[Path, typer.Option(
        "--out", help="Directory for the run artifact (run-<sha256>.json, immutable).")] = Path(".ragmon/gate-runs"),
    fmt: Annotated[Format, typer.Option(
        "--format",
        help="table (terminal), json (machines; stdout holds only the JSON), markdown (CI summaries).")] = Format.table,
    no_progress: Annotated[bool, typer.Option(
        "--no-progress", help="Do not show the progress bar (it is shown on a terminal only).")] = False,
    answerer: Annotated[str | None, typer.Option(
        "--answerer",
        help="Also gate generation: the answerer as module:function or path/to/file.py:function, called as f(question, "
             "chunks) with chunks = the top --k retrieved (chunk_id, text) pairs (texts from chunk_text(chunk_id) in "
             "the retriever's module). Returns {answer, citations: [{sentence, chunk_id, quote}], behaviour?, "
             "context?} or an object with those attributes. Every case, answerable or not, is answered and scored by "
             "the judge on the live scorer's path. See docs/gate.md.", show_default=False)] = None,
    judge: Annotated[JudgeKind | None, typer.Option(
        "--judge",
        help="With --answerer: the judge (default: judge.kind from --config / RAGMON_JUDGE__KIND; its other judge.* "
             "settings apply). Its fingerprint is printed and recorded in the artifact.", show_default=False)] = None,
    min_faithfulness: Annotated[float | None, typer.Option(
        "--min-faithfulness",
        help="With --answerer: minimum mean faithfulness (supported claims / claims), 0–1, per stratum. No default.",
        show_default=False)] = None,
    min_citation_precision: Annotated[float | None, typer.Option(
        "--min-citation-precision",
        help="With --answerer: minimum mean citation precision (quote verified in code and supporting), 0–1, per "
             "stratum. No default.", show_default=False)] = None,
    max_wrong_refusal_rate: Annotated[float | None, typer.Option(
        "--max-wrong-refusal-rate",
        help="With --answerer: maximum share of should-answer cases (golden expected_behaviour) that were declined, "
             "0–1, per stratum. No default.", show_default=False)] = None,
    max_missed_refusal_rate: Annotated[float | None, typer.Option(
        "--max-missed-refusal-rate",
        help="With --answerer: maximum share of should-decline cases (refuse/clarify/route) that were answered, 0–1, "
             "per stratum. No default.", show_default=False)] = None,
    allow_leaks: Annotated[str | None, typer.Option(
        "--allow-leaks", metavar='"REASON, APPROVER"',
        help="Let permission leaks pass: a golden case with a tenant whose ranking holds another (non-shared) tenant's "
             "chunk fails its stratum otherwise. Give the reason and, after the last comma, the named person who "
             "approved it; both are recorded in the run artifact. See docs/leaks.md.", show_default=False)] = None,
) -> None:
    """Gate a retriever on a golden set: per-stratum coverage@k, recall@depth, hit@k, MRR, nDCG@k and latency.

    Cases whose expected_behaviour is not 'answer' are excluded from retrieval scoring and counted. Every stratum and
    ALL are gated. Exit 0 when all meet every threshold, 1 when any misses one (FAIL marks say where), 2 on usage or
    input errors. Every completed run writes an immutable artifact to --out.

    With --answerer, generation is gated too: faithfulness, citation precision and recall, answer relevance
    (judge-scored through the same score_trace call, judge and fingerprint as live scoring) and refusal correctness as
    two numbers (wrong and missed refusals) over every case, in a second table.

    Example: ragmon gate examples/golden/dev.json --retriever examples.retriever:search --k 3 --depth 8 --min-coverage
    0.7 --min-mrr 0.6

    With generation: add --answerer examples.answerer:answer --min-faithfulness 0.8 --max-missed-refusal-rate 0
    """
    if k <= 0:
        raise fail(f"--k must be a positive integer, got {k}")
    approval: LeakApproval | None = None
    if allow_leaks is not None:
        try:
            approval = parse_approval(allow_leaks)
        except InputError as exc:
            raise fail(str(exc)) from None
    depth = k if depth is None else depth
    if depth < k:
        raise fail(f"--depth ({depth}) must be at least --k ({k}); it is the deeper cut-off")
    thresholds = Thresholds(min_coverage, min_mrr, min_ndcg, max_p95_ms, min_cases,
                            leaks_allowed=approval is not None)
    gen_thresholds = GenerationThresholds(min_faithfulness, min_citation_precision, max_wrong_refusal_rate,
                                          max_missed_refusal_rate)  # fmt: skip
    if problems := thresholds.problems() + gen_thresholds.problems():
        raise fail("; ".join(problems))
    check_output_dir(out, "--out")
    if answerer is None and (gen_thresholds.any or judge is not None):
        raise fail("--judge and the generation thresholds (--min-faithfulness, --min-citation-precision, "
                   "--max-wrong-refusal-rate, --max-missed-refusal-rate) need --answerer")  # fmt: skip
    try:
        golden = load_golden(golden_path)
        chosen_set = _set_name(golden, set_name)
        baseline = artifacts.load_artifact(compare) if compare is not None else None
        if baseline is not None:  # refuse before spending time on the run
            check_same_golden({"version": golden.version, "sha256": golden.sha256, "set": chosen_set}, baseline,
                              allow_different_golden)  # fmt: skip
        function, module = load_retriever(retriever)
        leak_check = LeakCheck.for_retriever(function, module, LeakRule.sharing(settings_of(ctx).ingest.shared_tenants))
        generation = None
        if answerer is not None:
            generation = prepare_generation(settings_of(ctx), answerer, judge and judge.value, retriever, module)
    except (InputError, ConfigError) as exc:
        raise fail(str(exc)) from None
    scored = sum(1 for c in golden.cases if c.expected_behaviour == "answer")
    if scored == 0:
        raise fail(f"{golden_path}: no case has expected_behaviour 'answer'; there is nothing to gate retrieval on")

    with Progress(TextColumn("gate"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=err_console,
                  transient=True, disable=no_progress) as progress:  # fmt: skip
        task = progress.add_task("cases", total=len(golden.cases))
        runs = run_gate_cases(golden.cases, function, k, depth, on_case=lambda _: progress.advance(task),
                              leak_check=leak_check)  # fmt: skip
        retriever_corpus = artifacts.retriever_snapshot(module)
        gen_result = gen_section = None
        if generation is not None:
            gen_task = progress.add_task("generation", total=len(golden.cases))
            gen_runs = run_generation(generation, golden.cases, runs, function, k, depth, retriever,
                                      retriever_corpus or "", on_case=lambda _: progress.advance(gen_task))  # fmt: skip
            gen_result = generation_result(generation, gen_runs, gen_thresholds)
            gen_section = artifacts.generation_section(answerer or "", generation.judge_kind, gen_result, gen_runs)

    result = build_result(runs, thresholds, k, depth)
    prior = artifacts.earlier_runs(out, golden.sha256, chosen_set)
    content = artifacts.build_artifact(
        golden=golden, set_name=chosen_set, runs=runs, result=result, retriever_spec=retriever,
        retriever_corpus=retriever_corpus, revision=artifacts.code_revision(Path.cwd()), created_at=datetime.now(UTC),
        generation=gen_section, leaks=leak_section(runs, approval),
    )  # fmt: skip
    comparison = None
    if baseline is not None:
        comparison = compare_runs(content, baseline, allow_different_golden=allow_different_golden, top=compare_top)
    try:
        path = artifacts.write_artifact(content, out)
    except InputError as exc:
        raise fail(str(exc)) from None

    notes = (_notes(golden, runs, retriever_corpus, chosen_set, prior) + small_strata_notes(result)
             + _leak_notes(runs, approval))
    if gen_section is not None:
        notes += generation_notes(gen_section)
    passed = result.passed and (gen_result is None or gen_result.passed)
    excluded = sum(1 for r in runs if r.excluded)
    summary = (f"{len(runs)} cases: {len(runs) - excluded} scored, {excluded} excluded (expected behaviour is not "
               f"'answer'); {chosen_set} set {golden.name!r} version {golden.version}")  # fmt: skip
    out_console = _out_console(fmt)
    if fmt == Format.json:
        payload = {**result.as_dict(), "artifact": str(path), "golden": content["golden"], "notes": notes,
                   "leaks": content["leaks"], "comparison": comparison.as_dict() if comparison else None}  # fmt: skip
        if gen_result is not None:
            payload |= {"passed": passed, "generation": gen_result.as_dict()}
        out_console.print(render_json(payload), markup=False, highlight=False)
    else:
        log = out_console if fmt == Format.table else err_console
        if fmt == Format.table:
            out_console.print(render_table(result))
            if gen_result is not None:
                out_console.print(render_generation_table(gen_result))
        else:
            out_console.print(render_markdown(result), markup=False, highlight=False, end="")
            if gen_result is not None:
                out_console.print("\n" + render_generation_markdown(gen_result), markup=False, highlight=False, end="")
        log.print(summary, markup=False, highlight=False)
        if gen_section is not None:
            log.print(judge_line(gen_section), markup=False, highlight=False, soft_wrap=True)
        for note in notes:
            log.print(f"note: {note}", markup=False, highlight=False, soft_wrap=True)
        if comparison is not None:
            before = comparison.parameters_before
            if before != content["parameters"]:
                log.print("baseline parameters: " + ", ".join(f"{k}={v}" for k, v in sorted(before.items())),
                          markup=False, highlight=False, soft_wrap=True)  # fmt: skip
            if comparison.golden_differs:
                log.print("warning: golden sets differ; only cases present in both runs are diffed", markup=False)
            if comparison.gains or comparison.losses:
                log.print(_comparison_table(comparison))
            log.print(f"{comparison.unchanged} case(s) unchanged; only in baseline: "
                      f"{len(comparison.only_in_baseline)}, "
                      f"only in this run: {len(comparison.only_in_current)}", markup=False)  # fmt: skip
        log.print(f"artifact: {path}", markup=False, highlight=False, soft_wrap=True)
        log.print(_verdict(result, gen_result), markup=False, highlight=False, soft_wrap=True)
    if not passed:
        raise typer.Exit(1)


def _leak_notes(runs: list[Any], approval: LeakApproval | None) -> list[str]:
    """One line per leaking case (chunk ids and tenants, never text), and the sign-off when there is one."""
    notes = [f"case {r.case_id!r} (user tenant {r.tenant!r}): permission leak: "
             + ", ".join(f"{c.chunk_id} (tenant {c.tenant!r})" for c in r.leaks) for r in runs if r.leaks]
    if approval is not None:
        state = "leaks allowed" if notes else "no leak found; the approval is recorded anyway"
        notes.append(f"--allow-leaks: {state} by {approval.approver!r}: {approval.reason}")
    return notes


def _verdict(result: Any, gen_result: GenerationResult | None) -> str:
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
