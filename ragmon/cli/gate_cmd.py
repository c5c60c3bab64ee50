"""``ragmon gate``: the offline release gate over a golden set, for CI.

Exit codes: 0 every stratum met every threshold; 1 some stratum missed some threshold or leaked another tenant's
chunk without ``--allow-leaks``; 2 usage or input error (bad arguments, a malformed ``--allow-leaks``, malformed
golden file, unloadable retriever, refused comparison). Writes an immutable run
artifact for every completed run, passing or not.

The command checks its arguments, loads its inputs, runs the cases, writes the artifact, then hands the run to
``ragmon.cli.gate_output`` to print; each step is a function below, each option an alias declared once.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from types import ModuleType
from typing import Annotated, Any

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from ragmon.cli.common import err_console, fail, settings_of
from ragmon.cli.gate_generation import PreparedGeneration, generation_result, prepare_generation, run_generation
from ragmon.cli.gate_output import Format, GateRun, print_report
from ragmon.cli.options import check_output_dir
from ragmon.errors import ConfigError, InputError
from ragmon.gate import artifact as artifacts
from ragmon.gate.compare import check_same_golden, compare_runs
from ragmon.gate.generation_report import GenerationResult, GenerationThresholds
from ragmon.gate.leaks import LeakApproval, LeakCheck, leak_section, parse_approval
from ragmon.gate.report import Thresholds, build_result
from ragmon.gate.runner import Retriever, load_retriever, run_gate_cases
from ragmon.golden_files import GoldenFile, load_golden
from ragmon.metrics.permissions import LeakRule


class SetName(StrEnum):
    dev = "dev"
    release = "release"


class JudgeKind(StrEnum):
    heuristic = "heuristic"
    openai = "openai"


def _option(name: str, help: str, **extra: Any) -> Any:
    """An option whose default is not shown: the required numbers have none, an optional one's is 'not given'."""
    return typer.Option(name, help=help, show_default=False, **extra)


def _answerer_threshold(name: str, what: str) -> Any:
    """A generation threshold: a number 0–1 per stratum, used with --answerer only, with no default."""
    return _option(name, f"With --answerer: {what}, 0–1, per stratum. No default.")


GoldenArgument = Annotated[Path, typer.Argument(
    metavar="GOLDEN.json",
    help="Golden set: a JSON array of golden-case.v1 cases, or an envelope {name, version, set, cases}.",
    show_default=False)]
RetrieverOption = Annotated[str, _option(
    "--retriever",
    "Retriever to gate, as module:function or path/to/file.py:function. Called as f(question, k) and must return "
    "ranked chunk ids or (chunk_id, score) pairs, best first. Modules in the working directory are importable.")]
KOption = Annotated[int, _option(
    "--k", "The k you actually pass to the model: coverage, hit, MRR and nDCG are computed at this cut-off.")]
MinCoverageOption = Annotated[float, _option(
    "--min-coverage",
    "Required. Minimum mean coverage (recall) at k, 0–1, for EVERY stratum and ALL. No default: agree it with the "
    "business before measuring.")]
MinMrrOption = Annotated[float, _option(
    "--min-mrr", "Required. Minimum mean reciprocal rank within the top k, 0–1, per stratum.")]
DepthOption = Annotated[int | None, _option(
    "--depth",
    "A second, larger cut-off: recall at this depth is reported beside coverage@k (the gap is what a reranker could "
    "win). The retriever is asked for this many. Default: k.")]
MinNdcgOption = Annotated[float | None, _option(
    "--min-ndcg",
    "Optional minimum mean nDCG@k (linear gain, log2 discount, trec_eval's convention), 0–1, per stratum.")]
MaxP95Option = Annotated[float | None, _option(
    "--max-p95-ms", "Optional maximum p95 retriever latency per stratum, in milliseconds.")]
MinCasesOption = Annotated[int | None, _option(
    "--min-cases",
    "A stratum with fewer scored cases is reported (verdict 'too few', with its coverage interval) but not gated on "
    "its own; its cases still count in ALL. Default: every stratum is gated; strata under 5 cases get a note with "
    "their 95% interval either way.")]
SetOption = Annotated[SetName | None, _option(
    "--set",
    "Which set this is: dev (tune against it) or release (frozen, run rarely, never tuned against). Recorded in the "
    "artifact; must match the file's \"set\" if it declares one.")]
CompareOption = Annotated[Path | None, _option(
    "--compare",
    "A previous run artifact: print the queries with the largest gains and losses against it. Refused when the "
    "golden set version differs.", metavar="ARTIFACT")]
AllowDifferentGoldenOption = Annotated[bool, typer.Option(
    "--allow-different-golden",
    help="Compare with --compare ARTIFACT even when its golden set version or content differs (only shared case ids "
         "are diffed).")]
CompareTopOption = Annotated[int, typer.Option(
    "--compare-top", min=1, max=1000, help="How many gains and how many losses to list with --compare.")]
OutOption = Annotated[Path, typer.Option(
    "--out", help="Directory for the run artifact (run-<sha256>.json, immutable).")]
FormatOption = Annotated[Format, typer.Option(
    "--format", help="table (terminal), json (machines; stdout holds only the JSON), markdown (CI summaries).")]
NoProgressOption = Annotated[bool, typer.Option(
    "--no-progress", help="Do not show the progress bar (it is shown on a terminal only).")]
AnswererOption = Annotated[str | None, _option(
    "--answerer",
    "Also gate generation: the answerer as module:function or path/to/file.py:function, called as f(question, "
    "chunks) with chunks = the top --k retrieved (chunk_id, text) pairs (texts from chunk_text(chunk_id) in the "
    "retriever's module). Returns {answer, citations: [{sentence, chunk_id, quote}], behaviour?, context?} or an "
    "object with those attributes. Every case, answerable or not, is answered and scored by the judge on the live "
    "scorer's path. See docs/gate.md.")]
JudgeOption = Annotated[JudgeKind | None, _option(
    "--judge",
    "With --answerer: the judge (default: judge.kind from --config / RAGMON_JUDGE__KIND; its other judge.* settings "
    "apply). Its fingerprint is printed and recorded in the artifact.")]
MinFaithfulnessOption = Annotated[float | None, _answerer_threshold(
    "--min-faithfulness", "minimum mean faithfulness (supported claims / claims)")]
MinCitationPrecisionOption = Annotated[float | None, _answerer_threshold(
    "--min-citation-precision", "minimum mean citation precision (quote verified in code and supporting)")]
MaxWrongRefusalRateOption = Annotated[float | None, _answerer_threshold(
    "--max-wrong-refusal-rate",
    "maximum share of should-answer cases (golden expected_behaviour) that were declined")]
MaxMissedRefusalRateOption = Annotated[float | None, _answerer_threshold(
    "--max-missed-refusal-rate", "maximum share of should-decline cases (refuse/clarify/route) that were answered")]
AllowLeaksOption = Annotated[str | None, _option(
    "--allow-leaks",
    "Let permission leaks pass: a golden case with a tenant whose ranking holds another (non-shared) tenant's chunk "
    "fails its stratum otherwise. Give the reason and, after the last comma, the named person who approved it; both "
    "are recorded in the run artifact. See docs/leaks.md.", metavar='"REASON, APPROVER"')]


def gate(
    ctx: typer.Context,
    golden_path: GoldenArgument,
    retriever: RetrieverOption,
    k: KOption,
    min_coverage: MinCoverageOption,
    min_mrr: MinMrrOption,
    depth: DepthOption = None,
    min_ndcg: MinNdcgOption = None,
    max_p95_ms: MaxP95Option = None,
    min_cases: MinCasesOption = None,
    set_name: SetOption = None,
    compare: CompareOption = None,
    allow_different_golden: AllowDifferentGoldenOption = False,
    compare_top: CompareTopOption = 10,
    out: OutOption = Path(".ragmon/gate-runs"),
    fmt: FormatOption = Format.table,
    no_progress: NoProgressOption = False,
    answerer: AnswererOption = None,
    judge: JudgeOption = None,
    min_faithfulness: MinFaithfulnessOption = None,
    min_citation_precision: MinCitationPrecisionOption = None,
    max_wrong_refusal_rate: MaxWrongRefusalRateOption = None,
    max_missed_refusal_rate: MaxMissedRefusalRateOption = None,
    allow_leaks: AllowLeaksOption = None,
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
    approval, depth = _check_cut_offs(k, depth, allow_leaks)
    thresholds = Thresholds(min_coverage, min_mrr, min_ndcg, max_p95_ms, min_cases,
                            leaks_allowed=approval is not None)
    gen_thresholds = GenerationThresholds(min_faithfulness, min_citation_precision, max_wrong_refusal_rate,
                                          max_missed_refusal_rate)  # fmt: skip
    _check_thresholds(thresholds, gen_thresholds, out, answerer, judge)
    inputs = _load_inputs(ctx, golden_path, set_name, compare, allow_different_golden, retriever, answerer, judge)
    cases = _run_cases(inputs, k, depth, retriever, answerer, gen_thresholds, no_progress)

    result = build_result(cases.runs, thresholds, k, depth)
    prior = artifacts.earlier_runs(out, inputs.golden.sha256, inputs.set_name)
    content = artifacts.build_artifact(
        golden=inputs.golden, set_name=inputs.set_name, runs=cases.runs, result=result, retriever_spec=retriever,
        retriever_corpus=cases.retriever_corpus, revision=artifacts.code_revision(Path.cwd()),
        created_at=datetime.now(UTC), generation=cases.gen_section, leaks=leak_section(cases.runs, approval),
    )  # fmt: skip
    comparison = None
    if inputs.baseline is not None:
        comparison = compare_runs(content, inputs.baseline, allow_different_golden=allow_different_golden,
                                  top=compare_top)  # fmt: skip
    run = GateRun(golden=inputs.golden, set_name=inputs.set_name, runs=cases.runs, result=result,
                  gen_result=cases.gen_result, gen_section=cases.gen_section, content=content, comparison=comparison,
                  path=_write_artifact(content, out), retriever_corpus=cases.retriever_corpus, prior=prior,
                  approval=approval)  # fmt: skip
    print_report(run, fmt)
    if not run.passed:
        raise typer.Exit(1)


@dataclass(frozen=True)
class _Inputs:
    """What the gate runs on, loaded and checked before the first case runs."""

    golden: GoldenFile
    set_name: str
    baseline: dict[str, Any] | None  # the --compare artifact
    function: Retriever
    module: ModuleType  # the retriever's module
    leak_check: LeakCheck
    generation: PreparedGeneration | None  # with --answerer


@dataclass(frozen=True)
class _Cases:
    """Every case run: retrieval, and generation with --answerer."""

    runs: list[Any]
    retriever_corpus: str | None
    gen_result: GenerationResult | None
    gen_section: dict[str, Any] | None


def _check_cut_offs(k: int, depth: int | None, allow_leaks: str | None) -> tuple[LeakApproval | None, int]:
    """The --allow-leaks sign-off and the depth (k when not given); a usage error for a bad k, depth or sign-off."""
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
    return approval, depth


def _check_thresholds(thresholds: Thresholds, gen_thresholds: GenerationThresholds, out: Path, answerer: str | None,
                      judge: JudgeKind | None) -> None:
    """A usage error for a threshold out of range, an --out that cannot be written, or generation options given
    without --answerer."""
    if problems := thresholds.problems() + gen_thresholds.problems():
        raise fail("; ".join(problems))
    check_output_dir(out, "--out")
    if answerer is None and (gen_thresholds.any or judge is not None):
        raise fail("--judge and the generation thresholds (--min-faithfulness, --min-citation-precision, "
                   "--max-wrong-refusal-rate, --max-missed-refusal-rate) need --answerer")  # fmt: skip


def _load_inputs(ctx: typer.Context, golden_path: Path, set_name: SetName | None, compare: Path | None,
                 allow_different_golden: bool, retriever: str, answerer: str | None,
                 judge: JudgeKind | None) -> _Inputs:
    """Load the golden set, the baseline artifact, the retriever and the answerer; a comparison that would be
    refused is refused here, before any time is spent on the run. Any input error is a usage error (exit 2)."""
    try:
        golden = load_golden(golden_path)
        chosen_set = _set_name(golden, set_name)
        baseline = artifacts.load_artifact(compare) if compare is not None else None
        if baseline is not None:
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
    return _Inputs(golden, chosen_set, baseline, function, module, leak_check, generation)


def _set_name(golden: GoldenFile, chosen: SetName | None) -> str:
    if chosen is not None and golden.set_name is not None and chosen.value != golden.set_name:
        raise InputError(f"--set {chosen.value} but {golden.path} declares \"set\": {golden.set_name!r}; "
                         "run the set the file says it is, or fix the file")  # fmt: skip
    name = chosen.value if chosen is not None else golden.set_name
    if name is None:
        raise InputError(f"{golden.path} does not say whether it is the dev or the release set: pass --set dev or "
                         "--set release (or add \"set\" to the file's envelope)")  # fmt: skip
    return name


def _run_cases(inputs: _Inputs, k: int, depth: int, retriever: str, answerer: str | None,
               gen_thresholds: GenerationThresholds, no_progress: bool) -> _Cases:
    """Run every case through the retriever, then (with --answerer) through the answerer and the judge, with a
    progress bar on stderr."""
    cases, generation = inputs.golden.cases, inputs.generation
    with Progress(TextColumn("gate"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=err_console,
                  transient=True, disable=no_progress) as progress:  # fmt: skip
        task = progress.add_task("cases", total=len(cases))
        runs = run_gate_cases(cases, inputs.function, k, depth, on_case=lambda _: progress.advance(task),
                              leak_check=inputs.leak_check)  # fmt: skip
        retriever_corpus = artifacts.retriever_snapshot(inputs.module)
        gen_result = gen_section = None
        if generation is not None:
            gen_task = progress.add_task("generation", total=len(cases))
            gen_runs = run_generation(generation, cases, runs, inputs.function, k, depth, retriever,
                                      retriever_corpus or "", on_case=lambda _: progress.advance(gen_task))  # fmt: skip
            gen_result = generation_result(generation, gen_runs, gen_thresholds)
            gen_section = artifacts.generation_section(answerer or "", generation.judge_kind, gen_result, gen_runs)
    return _Cases(runs, retriever_corpus, gen_result, gen_section)


def _write_artifact(content: dict[str, Any], out: Path) -> Path:
    try:
        return artifacts.write_artifact(content, out)
    except InputError as exc:
        raise fail(str(exc)) from None
