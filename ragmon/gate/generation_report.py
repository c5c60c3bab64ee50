"""The gate's generation verdict: per-stratum rows (and ALL) of judge-scored metrics and refusal correctness.

Faithfulness, citation precision and recall and answer relevance are means over the cases where the metric is
defined (None is skipped, never 0), each its own column. Refusal correctness is two numbers over every case,
answerable or not: wrong refusals / cases that should be answered and missed refusals / cases that should be
declined, with the golden ``expected_behaviour`` as the truth. Thresholds are optional and have no defaults. A
stratum where some case could not be generated or judged fails any generation threshold it is gated on
(``generation_errors``): an unmeasured case must not let a stratum pass. Aggregates and renders only.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

from rich.markup import escape
from rich.table import Table

from ragmon.gate.generation import GenerationRun
from ragmon.gated import StrataReport, per_stratum
from ragmon.metrics import RefusalOutcome, percentile, refusal_correctness
from ragmon.metrics.summary import mean_defined


@dataclass(frozen=True, slots=True)
class GenerationThresholds:
    """Optional generation gates; None means not gated."""

    min_faithfulness: float | None = None
    min_citation_precision: float | None = None
    max_wrong_refusal_rate: float | None = None
    max_missed_refusal_rate: float | None = None

    @property
    def any(self) -> bool:
        return any(v is not None for v in asdict(self).values())

    def problems(self) -> list[str]:
        return [f"--{name.replace('_', '-')} must be between 0 and 1, got {value}"
                for name, value in asdict(self).items()
                if value is not None and (not math.isfinite(value) or not 0 <= value <= 1)]  # fmt: skip


@dataclass(frozen=True, slots=True)
class GenerationRow:
    stratum: str
    n_cases: int
    n_scored: int
    n_errors: int
    faithfulness: float | None
    citation_precision: float | None
    citation_recall: float | None
    answer_relevance: float | None
    should_answer: int
    wrong_refusals: int
    wrong_refusal_rate: float | None
    should_decline: int
    missed_refusals: int
    missed_refusal_rate: float | None
    wrong_declines: int  # declined, but not as expected (refused where it should have routed)
    generate_p50_ms: float | None
    generate_p95_ms: float | None
    failures: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class GenerationResult(StrataReport[GenerationRow]):
    """The generation verdict, with the judge identity and thresholds it was reached under."""

    judge_name: str
    judge_model: str
    judge_fingerprint: str
    thresholds: GenerationThresholds
    rows: tuple[GenerationRow, ...]  # strata in name order, then ALL

    def parameters(self) -> dict[str, object]:
        return {"judge": {"name": self.judge_name, "model": self.judge_model, "fingerprint": self.judge_fingerprint},
                "thresholds": asdict(self.thresholds)}


def _row(name: str, runs: Sequence[GenerationRun], t: GenerationThresholds) -> GenerationRow:
    ok = [r for r in runs if r.error is None]
    refusals = refusal_correctness(RefusalOutcome(r.outcome) for r in ok if r.outcome is not None)
    metric = {m: mean_defined(r.values.get(m) for r in ok)
              for m in ("faithfulness", "citation_precision", "citation_recall", "answer_relevance")}  # fmt: skip
    latencies = [r.generate_ms for r in runs if r.generate_ms is not None]
    failures = []
    for field, bound, too_low in (
        ("faithfulness", t.min_faithfulness, True),
        ("citation_precision", t.min_citation_precision, True),
        ("wrong_refusal_rate", t.max_wrong_refusal_rate, False),
        ("missed_refusal_rate", t.max_missed_refusal_rate, False),
    ):
        value = metric.get(field, getattr(refusals, field, None))
        if bound is not None and value is not None and (value < bound if too_low else value > bound):
            failures.append(field)
    n_errors = len(runs) - len(ok)
    if t.any and n_errors:
        failures.append("generation_errors")
    return GenerationRow(
        stratum=name, n_cases=len(runs), n_scored=len(ok), n_errors=n_errors, **metric,
        should_answer=refusals.should_answer, wrong_refusals=refusals.wrong_refusals,
        wrong_refusal_rate=refusals.wrong_refusal_rate, should_decline=refusals.should_decline,
        missed_refusals=refusals.missed_refusals, missed_refusal_rate=refusals.missed_refusal_rate,
        wrong_declines=refusals.wrong_declines, generate_p50_ms=percentile(latencies, 50),
        generate_p95_ms=percentile(latencies, 95), failures=tuple(failures),
    )  # fmt: skip


def build_generation_result(runs: Sequence[GenerationRun], thresholds: GenerationThresholds, judge_name: str,
                            judge_model: str, judge_fingerprint: str) -> GenerationResult:  # fmt: skip
    rows = per_stratum(runs, lambda run: run.category, lambda name, group: _row(name, group, thresholds))
    return GenerationResult(judge_name, judge_model, judge_fingerprint, thresholds, rows)


HEADERS = ("stratum", "n", "err", "faithfulness", "cit. precision", "cit. recall", "answer rel.",
           "wrong refusals", "missed refusals", "gen p95 ms", "verdict")  # fmt: skip


def _num(value: float | None, fail: bool, digits: int = 3) -> str:
    text = "—" if value is None else f"{value:.{digits}f}"
    return f"{text} FAIL" if fail else text


def _cells(row: GenerationRow) -> list[str]:
    f = set(row.failures)
    return [
        str(row.n_scored), _num(row.n_errors, "generation_errors" in f, 0),
        *(_num(getattr(row, m), m in f) for m in ("faithfulness", "citation_precision", "citation_recall",
                                                   "answer_relevance")),
        f"{row.wrong_refusals}/{row.should_answer} " + _num(row.wrong_refusal_rate, "wrong_refusal_rate" in f),
        f"{row.missed_refusals}/{row.should_decline} " + _num(row.missed_refusal_rate, "missed_refusal_rate" in f),
        _num(row.generate_p95_ms, False, 1),
    ]  # fmt: skip


def render_generation_table(result: GenerationResult) -> Table:
    table = Table(title=f"generation: {result.judge_name} judge, fingerprint {result.judge_fingerprint}",
                  title_justify="left")  # fmt: skip
    for i, header in enumerate(HEADERS):
        table.add_column(header, justify="left" if i == 0 else "right", no_wrap=True)
    for row in result.rows:
        cells = [f"[bold red]{escape(c)}[/]" if c.endswith("FAIL") else escape(c) for c in _cells(row)]
        verdict = "[bold red]FAIL[/]" if row.failures else "[green]pass[/]"
        last = row is result.rows[-1]
        table.add_row("[bold]ALL[/]" if last else escape(row.stratum), *cells, verdict,
                      end_section=len(result.rows) > 1 and row is result.rows[-2])  # fmt: skip
    return table


def render_generation_markdown(result: GenerationResult) -> str:
    lines = [f"Generation: {result.judge_name} judge, fingerprint `{result.judge_fingerprint}`", "",
             "| " + " | ".join(HEADERS) + " |",
             "|" + "|".join(["---"] + ["---:"] * (len(HEADERS) - 1)) + "|"]  # fmt: skip
    for row in result.rows:
        cells = [c.replace(" FAIL", " **FAIL**") for c in _cells(row)]
        lines.append("| " + " | ".join([row.stratum.replace("|", "\\|"), *cells,
                                         "**FAIL**" if row.failures else "pass"]) + " |")  # fmt: skip
    return "\n".join(lines) + "\n"
