"""Judge calibration: pair human labels with judge verdicts, and measure agreement per metric and stratum.

Owns the label ↔ metric mapping (a human "grounded" is compared with faithfulness ≥ threshold, and so on),
pairing labels with a fresh judgement of the labelled traces, judged up to ``judge.max_in_flight`` at once (that
is how a new fingerprint is calibrated before it scores anything), and ``calibrate`` → ``CalibrationResult`` per
fingerprint. Results never pool
fingerprints. No I/O here: ``ragmon.score.labels`` reads labels from the store or a file.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from ragmon.gated import Gated
from ragmon.judge.agreement import Agreement, cohen_kappa
from ragmon.judge.pool import JudgePool
from ragmon.judge.scoring import score_trace

#: human label column → (judge metric, threshold: the judge says "yes" when the metric is >= it)
LABEL_METRICS: dict[str, tuple[str, float]] = {
    "grounded": ("faithfulness", 1.0),
    "citations_supported": ("citation_precision", 1.0),
    "refusal_appropriate": ("refusal_correct", 1.0),
}
#: the all-strata cell
ALL = "*"


@dataclass(frozen=True, slots=True)
class Pair:
    """One human label and the judge's binarized verdict on the same trace."""

    trace_id: str
    category: str
    label: str
    human: int
    judge: int
    fingerprint: str
    judge_name: str = ""
    reviewer: str = ""
    judge_value: float | None = None


@dataclass(frozen=True, slots=True)
class Cell:
    """Agreement for one (label, stratum), the items where judge and humans disagree, and why the gate failed
    this cell (empty when it passed or was not gated)."""

    label: str
    metric: str
    threshold: float
    stratum: str
    agreement: Agreement
    disagreements: tuple[Pair, ...]
    failures: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class CalibrationResult(Gated[Cell]):
    """One fingerprint's calibration, with the gate parameters applied and its verdict (``passed``)."""

    fingerprint: str
    judge_name: str
    cells: tuple[Cell, ...]
    min_kappa: float | None
    min_items: int

    @property
    def rows(self) -> tuple[Cell, ...]:
        return self.cells

    @property
    def failures(self) -> tuple[str, ...]:
        """Every gated cell's failure, in cell order."""
        return tuple(failure for cell in self.cells for failure in cell.failures)

    def as_dict(self) -> dict[str, Any]:
        """The JSON form ``ragmon calibrate --output json`` prints, one per fingerprint."""
        return {
            "fingerprint": self.fingerprint, "judge": self.judge_name, "min_kappa": self.min_kappa,
            "min_items": self.min_items, "passed": self.passed, "failures": list(self.failures),
            "cells": [{"label": c.label, "metric": c.metric, "threshold": c.threshold, "stratum": c.stratum,
                       **asdict(c.agreement), "disagreements": [asdict(p) for p in c.disagreements]}
                      for c in self.cells],
        }


def binarize(label: str, value: float, thresholds: Mapping[str, tuple[str, float]] = LABEL_METRICS) -> int:
    return int(value >= thresholds[label][1])


def calibrate(pairs: Iterable[Pair], *, min_kappa: float | None = None, min_items: int = 10,
              thresholds: Mapping[str, tuple[str, float]] = LABEL_METRICS) -> list[CalibrationResult]:
    """Per fingerprint: a cell per (label, stratum) and per label over all strata; the gate if ``min_kappa``.

    The gate fails a fingerprint when any all-strata cell, or any stratum cell with at least ``min_items``
    pairs, has a kappa below ``min_kappa`` or an undefined kappa (agreement beyond chance not shown).
    """
    by_fp: dict[str, list[Pair]] = defaultdict(list)
    for p in pairs:
        by_fp[p.fingerprint].append(p)
    results = []
    for fp in sorted(by_fp):
        group = by_fp[fp]
        cells: list[Cell] = []
        for label in [lab for lab in thresholds if any(p.label == lab for p in group)]:
            metric, threshold = thresholds[label]
            mine = [p for p in group if p.label == label]
            strata = sorted({p.category for p in mine})
            for stratum in [ALL, *strata]:
                subset = mine if stratum == ALL else [p for p in mine if p.category == stratum]
                agreement = cohen_kappa([p.human for p in subset], [p.judge for p in subset], labels=(0, 1))
                failures: tuple[str, ...] = ()
                if min_kappa is not None and (stratum == ALL or agreement.n >= min_items):
                    failures = _kappa_failures(f"{label} (judge {metric} >= {threshold:g}), stratum {stratum}",
                                               agreement, min_kappa)
                cells.append(Cell(label, metric, threshold, stratum, agreement,
                                  tuple(p for p in subset if p.human != p.judge), failures))
        results.append(CalibrationResult(fp, group[0].judge_name, tuple(cells), min_kappa, min_items))
    return results


def _kappa_failures(where: str, agreement: Agreement, min_kappa: float) -> tuple[str, ...]:
    """Why a gated cell fails: an undefined kappa (agreement beyond chance not shown) or one under the bar."""
    if agreement.kappa is None:
        return (f"{where}: kappa undefined on {agreement.n} items (every label the same); label items of both "
                "classes",)
    if agreement.kappa < min_kappa:
        return (f"{where}: kappa {agreement.kappa:.3f} < {min_kappa:g} on {agreement.n} items",)
    return ()


def pairs_from_items(items: Sequence[tuple[dict[str, Any], Mapping[str, Any], str]], judge: Any,
                     thresholds: Mapping[str, tuple[str, float]] = LABEL_METRICS, *,
                     max_in_flight: int = 1) -> list[Pair]:
    """Judge each (trace, human labels, reviewer), up to ``max_in_flight`` at once, and pair the labels with the
    binarized metrics (in the order of ``items``). A judge error propagates, as one at a time."""
    pool = JudgePool.for_judge(judge, max_in_flight)
    try:
        judged = [f.result() for f in pool.map(lambda item: score_trace(judge, item[0]), items)]
    finally:
        pool.close()
    out = []
    for (trace, labels, reviewer), scores in zip(items, judged, strict=True):
        for label, (metric, _) in thresholds.items():
            human = labels.get(label)
            value = scores.value(metric)
            if human is None or value is None:
                continue
            out.append(Pair(scores.trace_id, trace.get("category") or "", label, int(bool(human)),
                            binarize(label, value, thresholds), scores.judge_fingerprint, judge.name, reviewer,
                            value))
    return out
