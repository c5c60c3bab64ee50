"""Judge drift: judge-vs-human agreement (Cohen's kappa) week by week, against the level it was calibrated at.

A judge whose agreement with reviewers slowly falls is a failure that no score distribution shows: the scores
move because the judge moved, or do not move while the answers got worse. Per judge fingerprint (never pooled),
per label and per stratum (plus ``ALL``), this module takes the weekly pairs of a human label and the judge's
binarized verdict and gives:

* the **calibrated level**: kappa over the fingerprint's first ``calibration_weeks`` labelled weeks (the period
  a new fingerprint is calibrated in, ``ragmon calibrate``), with its 95% interval;
* each later week's kappa with its 95% interval, and whether the **latest** week (with at least ``min_pairs``
  pairs) is **low**: its kappa is below the calibrated level by more than the interval of that difference,
  1.96·√(SE_week² + SE_calibrated²) (the weeks are disjoint from the calibration weeks, so independent): a
  drop that a week's sampling noise does not explain.

SE is the large-sample one, SE = √(p_o(1−p_o) / (n(1−p_e)²)) (Cohen 1960): adequate at the tens to hundreds of
labels a week gives; an undefined kappa (one label used throughout) has none. A cell that can say neither ok nor
low says why (``no_verdict``): calibration weeks still to come, too few label pairs (and how many), an undefined
kappa.
Pure: no I/O, no clock.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from ragmon.judge.agreement import Agreement, cohen_kappa
from ragmon.judge.calibrate import Pair

#: the stratum value of the all-strata cell in these results and their gauges
ALL = "ALL"
Z_95 = 1.959963984540054


def kappa_interval(agreement: Agreement, z: float = Z_95) -> float | None:
    """Half-width of kappa's large-sample confidence interval (``z`` = 1.96 for 95%); None when undefined.

    ``SE = √(p̃(1 − p̃) / (ñ (1 − p_e)²))`` with the observed agreement taken as Agresti and Coull take a share,
    ``p̃ = (n p_o + z²/2) / ñ``, ``ñ = n + z²``: the plain Wald form gives a width of 0 at perfect agreement
    (``κ = 1.00 ±0.00`` from 12 pairs), and too narrow a one near it, where small weeks of reviews sit."""
    a = agreement
    if a.kappa is None or a.observed is None or a.expected is None or a.n == 0:
        return None
    n = a.n + z * z
    p = (a.n * a.observed + z * z / 2) / n
    return z * math.sqrt(p * (1.0 - p) / (n * (1.0 - a.expected) ** 2))


@dataclass(frozen=True, slots=True)
class WeekAgreement:
    """Agreement of one (fingerprint, label, stratum) over one week's pairs (or the calibration weeks)."""

    week: str  # ISO week of the reviewed traces ("2026-W49"); for the calibration, "first..last"
    n: int
    kappa: float | None
    interval: float | None  # half-width, 95%


@dataclass(frozen=True, slots=True)
class AgreementTrend:
    """The weekly series of one (fingerprint, label, stratum), its calibrated level and the verdict on the latest
    week; ``low`` is False until there is both a calibration and a later week with ``min_pairs`` pairs."""

    fingerprint: str
    label: str
    stratum: str
    calibrated: WeekAgreement | None
    weeks: tuple[WeekAgreement, ...]  # after the calibration, oldest first, each with at least min_pairs pairs
    calibration_weeks: int
    min_pairs: int
    #: weeks of the fingerprint and label with pairs (over all strata), and this cell's pairs in the calibration
    labelled_weeks: int = 0
    calibration_pairs: int = 0
    #: weeks after the calibration left out for having fewer than min_pairs pairs in this cell: (week, pairs)
    skipped: tuple[tuple[str, int], ...] = ()

    @property
    def latest(self) -> WeekAgreement | None:
        return self.weeks[-1] if self.weeks else None

    @property
    def drop_interval(self) -> float | None:
        """Half-width of the 95% interval of (calibrated − latest kappa); None when either is undefined."""
        cal, last = self.calibrated, self.latest
        if cal is None or last is None or cal.interval is None or last.interval is None:
            return None
        return math.hypot(cal.interval, last.interval)  # each interval is 1.96·SE: their root-sum-square is too

    @property
    def no_verdict(self) -> str | None:
        """Why the cell can say neither ok nor low (None: it can)."""
        cal, last, n = self.calibrated, self.latest, self.min_pairs
        if cal is None:
            if self.labelled_weeks < self.calibration_weeks:
                return f"not calibrated yet: {self.labelled_weeks} of {self.calibration_weeks} calibration weeks labelled"
            return f"not calibrated: {self.calibration_pairs} label pairs in the calibration weeks, fewer than {n}"
        if cal.kappa is None:
            return "calibrated kappa undefined: one answer throughout the calibration weeks (reviewers or judge)"
        if last is None:
            if self.skipped:
                weeks = ", ".join(f"{w} {k}" for w, k in self.skipped)
                return f"no week since the calibration has {n} label pairs or more (fewer than {n}: {weeks})"
            return "no labelled week since the calibration yet"
        if last.kappa is None:
            return f"kappa undefined in {last.week}: one answer throughout (reviewers or judge)"
        return None

    @property
    def low(self) -> bool:
        cal, last, margin = self.calibrated, self.latest, self.drop_interval
        if cal is None or cal.kappa is None or last is None or last.kappa is None or margin is None:
            return False
        return cal.kappa - last.kappa > margin


def _agreement(pairs: list[Pair], week: str) -> WeekAgreement:
    a = cohen_kappa([p.human for p in pairs], [p.judge for p in pairs], labels=(0, 1))
    return WeekAgreement(week, a.n, a.kappa, kappa_interval(a))


def agreement_trends(weekly_pairs: Iterable[tuple[str, Pair]], *, calibration_weeks: int = 4,
                     min_pairs: int = 20) -> list[AgreementTrend]:  # fmt: skip
    """Trends for every (fingerprint, label, stratum) and (fingerprint, label, ALL) in ``weekly_pairs``, which are
    ``(ISO week, pair)``. The calibration is each fingerprint's first ``calibration_weeks`` weeks with pairs of
    that label (over all strata, so every stratum of a fingerprint is calibrated over the same weeks); weeks
    after it with fewer than ``min_pairs`` pairs in the cell are left out (their kappa is noise)."""
    if calibration_weeks < 1 or min_pairs < 1:
        raise ValueError(f"calibration_weeks and min_pairs must be at least 1, got {calibration_weeks}, {min_pairs}")
    cells: dict[tuple[str, str, str], dict[str, list[Pair]]] = defaultdict(lambda: defaultdict(list))
    for week, pair in weekly_pairs:
        for stratum in (pair.category, ALL):
            cells[(pair.fingerprint, pair.label, stratum)][week].append(pair)
    out = []
    for (fingerprint, label, stratum), by_week in sorted(cells.items()):
        all_weeks = sorted(cells[(fingerprint, label, ALL)])
        calibration = set(all_weeks[:calibration_weeks])
        cal_pairs = [p for w in sorted(by_week) if w in calibration for p in by_week[w]]
        calibrated = None
        # not calibrated until the calibration weeks have passed, nor on fewer than min_pairs pairs
        if len(cal_pairs) >= min_pairs and len(all_weeks) >= calibration_weeks:
            span = f"{min(calibration)}..{max(calibration)}"
            calibrated = _agreement(cal_pairs, span)
        later = [_agreement(by_week[w], w) for w in sorted(by_week)
                 if w not in calibration and len(by_week[w]) >= min_pairs]  # fmt: skip
        skipped = tuple((w, len(by_week[w])) for w in sorted(by_week)
                        if w not in calibration and len(by_week[w]) < min_pairs)  # fmt: skip
        out.append(AgreementTrend(fingerprint, label, stratum, calibrated, tuple(later), calibration_weeks, min_pairs,
                                  len(all_weeks), len(cal_pairs), skipped))
    return out
