"""``ragmon calibrate``: agreement (Cohen's kappa) between a judge and human labels, optionally as a gate."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from ragmon.cli.common import EXIT_USAGE, console, fail, settings_of
from ragmon.cli.options import check_format
from ragmon.config import Settings
from ragmon.judge.calibrate import ALL, LABEL_METRICS, CalibrationResult, Pair

# The options of ``ragmon calibrate``, each declared once; the option name comes from the parameter's name unless given.
LabelsOption = Annotated[Path | None, typer.Option(
    "--labels", help="Labelled file instead of the store: JSON array, JSON Lines or CSV of judged pairs (trace_id, "
    "label, human, judge[, category, judge_fingerprint]), or JSON items {trace, labels, reviewer} that the configured "
    "judge judges now.", show_default=False)]
RejudgeOption = Annotated[bool, typer.Option(
    "--rejudge", help="Judge the human-labelled stored traces now with the configured judge (writes nothing): how a "
    "new judge fingerprint is calibrated before it scores live traffic.")]
JudgeOption = Annotated[str | None, typer.Option(
    help="With --rejudge or labelled traces: judge kind, heuristic or openai (judge.kind).", show_default=False)]
FingerprintOption = Annotated[str | None, typer.Option(
    help="Only this judge fingerprint (default: every fingerprint found, each reported on its own).",
    show_default=False)]
SinceOption = Annotated[str | None, typer.Option(help="Only labels given since ('30d', ISO 8601).", show_default=False)]
UntilOption = Annotated[str | None, typer.Option(help="Only labels given before this.", show_default=False)]
MinKappaOption = Annotated[float | None, typer.Option(
    help="Gate: exit 1 when a label's kappa (all strata, and each stratum with at least --min-items pairs) is below "
    "this, or undefined. Landis & Koch call 0.61-0.80 substantial agreement.", show_default=False)]
MinItemsOption = Annotated[int, typer.Option(
    help="Strata with fewer pairs are shown but not gated (their kappa is too noisy).")]
ThresholdOption = Annotated[list[str] | None, typer.Option(
    help="label=value: the judge says yes when its metric is at least value (repeatable). Defaults: "
    + ", ".join(f"{k}={v:g} ({m})" for k, (m, v) in LABEL_METRICS.items()) + ".", show_default=False)]
ShowDisagreementsOption = Annotated[int, typer.Option(help="Disagreements listed per label (0 hides them).")]
FormatOption = Annotated[str, typer.Option("--format", help="table or json.")]


def calibrate(
    ctx: typer.Context,
    labels: LabelsOption = None,
    rejudge: RejudgeOption = False,
    judge: JudgeOption = None,
    fingerprint: FingerprintOption = None,
    since: SinceOption = None,
    until: UntilOption = None,
    min_kappa: MinKappaOption = None,
    min_items: MinItemsOption = 10,
    threshold: ThresholdOption = None,
    show_disagreements: ShowDisagreementsOption = 10,
    output: FormatOption = "table",
) -> None:
    """Measure how well a judge agrees with human reviewers, per label and per stratum.

    Human labels (from review_labels, or --labels FILE) are compared with the judge's verdicts binarized at a threshold:
    grounded ↔ faithfulness, citations_supported ↔ citation_precision, refusal_appropriate ↔ refusal_correct. For each:
    Cohen's kappa (chance-corrected), raw agreement, the confusion matrix, and the disagreements to read.

    Results are per judge fingerprint, never pooled. With --min-kappa the command is a gate: exit 1 if any gated kappa
    is too low, so a new fingerprint can be held back until it agrees with humans.
    """
    check_format(output)
    if min_kappa is not None and not -1.0 <= min_kappa <= 1.0:
        raise fail(f"--min-kappa {min_kappa} is outside [-1, 1]", EXIT_USAGE)
    if min_items < 1:
        raise fail("--min-items must be at least 1", EXIT_USAGE)
    thresholds = _thresholds(threshold or [])
    from ragmon.cli.options import parse_when
    from ragmon.config import override
    from ragmon.judge.calibrate import calibrate as run_calibration

    settings = override(settings_of(ctx), "judge", kind=judge)
    now = datetime.now(UTC)
    start = parse_when(since, now, "--since") if since else None
    end = parse_when(until, now, "--until") if until else None
    pairs, source = _pairs(settings, labels, rejudge, fingerprint, start, end, thresholds)
    if fingerprint:
        pairs = [p for p in pairs if p.fingerprint == fingerprint]
    if not pairs:
        raise fail(f"no human labels paired with judge verdicts in {source}"
                   + (f" for fingerprint {fingerprint}" if fingerprint else "")
                   + ": label traces in the review UI (ragmon review), score them (ragmon score), use --rejudge, "
                   "or pass --labels FILE", EXIT_USAGE)
    results = run_calibration(pairs, min_kappa=min_kappa, min_items=min_items, thresholds=thresholds)
    if output == "json":
        console.print_json(json.dumps([r.as_dict() for r in results]))
    else:
        for r in results:
            _print(r, show_disagreements)
    if min_kappa is not None:
        _gate(results, min_kappa)


def _pairs(settings: Settings, labels: Path | None, rejudge: bool, fingerprint: str | None, start: datetime | None,
           end: datetime | None, thresholds: dict[str, tuple[str, float]]) -> tuple[list[Pair], str]:
    """The (human, judge) pairs to calibrate on, and where they came from: the --labels file, the stored labels
    re-judged now (--rejudge), or the stored labels joined with the stored scores."""
    from ragmon.judge import make_judge
    from ragmon.score.labels import load_label_file, pairs_by_rejudging, pairs_from_store

    if labels is not None:
        return load_label_file(labels, make_judge(settings.judge), thresholds), str(labels)
    from ragmon.cli.store_open import open_store

    store = open_store(settings)
    if rejudge:
        pairs = pairs_by_rejudging(store, make_judge(settings.judge), since=start, until=end,
                                   thresholds=thresholds, max_in_flight=settings.judge.max_in_flight)
    else:
        pairs = pairs_from_store(store, since=start, until=end, fingerprint=fingerprint, thresholds=thresholds)
    return pairs, "review_labels" + (" (re-judged)" if rejudge else " × scores")


def _gate(results: list[CalibrationResult], min_kappa: float) -> None:
    """--min-kappa: a FAIL line per gated kappa too low and exit 1, or one PASS line."""
    failed = [r for r in results if not r.passed]
    for r in failed:
        for line in r.failures:
            console.print(f"[red]FAIL[/red] {r.fingerprint}: {line}", highlight=False)
    if failed:
        raise typer.Exit(1)
    console.print(f"[green]PASS[/green] every gated kappa >= {min_kappa:g}")


def _thresholds(items: list[str]) -> dict[str, tuple[str, float]]:
    out = dict(LABEL_METRICS)
    for item in items:
        label, sep, value = item.partition("=")
        if not sep or label not in out:
            raise fail(f"--threshold {item!r}: expected label=value with label one of {sorted(out)}", EXIT_USAGE)
        try:
            number = float(value)
        except ValueError:
            raise fail(f"--threshold {item!r}: {value!r} is not a number", EXIT_USAGE) from None
        if not math.isfinite(number):
            raise fail(f"--threshold {item!r}: the value must be a finite number", EXIT_USAGE)
        out[label] = (out[label][0], number)
    return out


def _print(result: CalibrationResult, show: int) -> None:
    table = Table("label", "judge metric ≥", "stratum", "n", "kappa", "agreement", "chance",
                  "h1·j1", "h1·j0", "h0·j1", "h0·j0",
                  title=f"judge {result.judge_name or '?'} · fingerprint {result.fingerprint}")
    for c in result.cells:
        a = c.agreement
        m = a.matrix  # rows human (0, 1), columns judge (0, 1)
        table.add_row(c.label, f"{c.metric} {c.threshold:g}", c.stratum, f"{a.n:,}",
                      "undefined" if a.kappa is None else f"{a.kappa:.3f}",
                      "—" if a.observed is None else f"{a.observed:.3f}",
                      "—" if a.expected is None else f"{a.expected:.3f}",
                      str(m[1][1]), str(m[1][0]), str(m[0][1]), str(m[0][0]),
                      end_section=c.stratum != ALL and c is result.cells[-1])
    console.print(table)
    if show <= 0:
        return
    for c in result.cells:
        if c.stratum != ALL or not c.disagreements:
            continue
        console.print(f"disagreements on {c.label} ({len(c.disagreements)}; first {min(show, len(c.disagreements))}):")
        for p in c.disagreements[:show]:
            value = "" if p.judge_value is None else f" ({c.metric} {p.judge_value:.2f})"
            console.print(f"  {p.trace_id} [{p.category or '-'}] human {'yes' if p.human else 'no'}, judge "
                          f"{'yes' if p.judge else 'no'}{value}{' · ' + p.reviewer if p.reviewer else ''}",
                          highlight=False, markup=False)

