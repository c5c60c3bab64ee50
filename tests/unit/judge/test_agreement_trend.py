"""Judge drift statistics: kappa's interval by hand, the calibration weeks, and when the latest week is low."""

from __future__ import annotations

import pytest

from ragmon.judge.agreement import cohen_kappa
from ragmon.judge.agreement_trend import ALL, agreement_trends, kappa_interval
from ragmon.judge.calibrate import Pair


def pairs(week: str, agree: int, disagree: int, category: str = "billing", fp: str = "fp1",
          label: str = "grounded") -> list[tuple[str, Pair]]:  # fmt: skip
    """``agree`` + ``disagree`` pairs, balanced between yes and no, so p_e = 0.5 and kappa = 2·p_o − 1."""
    out = []
    for i in range(agree):
        h = i % 2
        out.append((week, Pair(f"{week}-a{i}", category, label, h, h, fp)))
    for i in range(disagree):
        h = i % 2
        out.append((week, Pair(f"{week}-d{i}", category, label, h, 1 - h, fp)))
    return out


def test_kappa_interval_by_hand() -> None:
    # 40 yes/yes, 10 yes/no, 10 no/yes, 40 no/no: p_o 0.8, p_e 0.5, kappa 0.6; with z² = 3.8415 added,
    # ñ = 103.8415, p̃ = (80 + 1.9207) / ñ = 0.78891, SE = √(p̃(1 − p̃) / (ñ · 0.25)) = 0.080094
    a = cohen_kappa([1] * 50 + [0] * 50, [1] * 40 + [0] * 10 + [1] * 10 + [0] * 40)
    assert a.kappa == pytest.approx(0.6)
    assert kappa_interval(a) == pytest.approx(1.959963984540054 * 0.080094, rel=1e-4)
    assert kappa_interval(cohen_kappa([1, 1], [1, 1])) is None  # one label throughout: undefined


def test_perfect_agreement_on_few_pairs_is_not_certain() -> None:
    """12 pairs, all agreeing: kappa 1, but 12 pairs cannot make it certain (the Wald form said ±0.00)."""
    a = cohen_kappa([1] * 6 + [0] * 6, [1] * 6 + [0] * 6)
    assert a.kappa == pytest.approx(1.0)
    width = kappa_interval(a)
    assert width is not None and 0.2 < width < 0.6


def test_a_week_far_below_the_calibration_is_low_and_a_small_dip_is_not() -> None:
    calibration = [p for w in ("2026-W01", "2026-W02") for p in pairs(w, 46, 4)]  # kappa 0.84 over 100 pairs
    dip = pairs("2026-W03", 42, 8)  # kappa 0.68 on 50: 0.16 below, within the 0.236 the noise allows
    drop = pairs("2026-W04", 30, 20)  # kappa 0.2 on 50: 0.64 below, more than 0.286
    [all_dip, billing_dip] = agreement_trends(calibration + dip, calibration_weeks=2, min_pairs=20)
    assert billing_dip.stratum == "billing" and all_dip.stratum == ALL
    assert billing_dip.calibrated is not None and billing_dip.calibrated.kappa == pytest.approx(0.84)
    assert billing_dip.calibrated.week == "2026-W01..2026-W02" and billing_dip.latest.kappa == pytest.approx(0.68)
    assert not billing_dip.low and billing_dip.drop_interval == pytest.approx(0.2360, abs=1e-4)
    [_, trend] = agreement_trends(calibration + dip + drop, calibration_weeks=2, min_pairs=20)
    assert [w.week for w in trend.weeks] == ["2026-W03", "2026-W04"] and trend.latest.kappa == pytest.approx(0.2)
    assert trend.low and trend.drop_interval == pytest.approx(0.2858, abs=1e-4)
    assert trend.drop_interval == pytest.approx(
        (kappa_interval(cohen_kappa([p.human for _, p in calibration], [p.judge for _, p in calibration])) ** 2
         + kappa_interval(cohen_kappa([p.human for _, p in drop], [p.judge for _, p in drop])) ** 2) ** 0.5)


def test_nothing_is_compared_before_the_calibration_weeks_passed_or_on_too_few_pairs() -> None:
    [_, early] = agreement_trends(pairs("2026-W01", 46, 4) + pairs("2026-W02", 10, 40), calibration_weeks=3)
    assert early.calibrated is None and early.weeks == () and not early.low
    thin = pairs("2026-W01", 46, 4) + pairs("2026-W02", 4, 6)  # the later week has 10 pairs < 20
    [_, trend] = agreement_trends(thin, calibration_weeks=1, min_pairs=20)
    assert trend.weeks == () and not trend.low


def test_fingerprints_and_labels_are_never_pooled() -> None:
    mixed = pairs("2026-W01", 46, 4, fp="a") + pairs("2026-W01", 4, 46, fp="b", label="citations_supported")
    cells = {(t.fingerprint, t.label, t.stratum): t for t in agreement_trends(mixed, calibration_weeks=1, min_pairs=1)}
    assert set(cells) == {("a", "grounded", "billing"), ("a", "grounded", ALL),
                          ("b", "citations_supported", "billing"), ("b", "citations_supported", ALL)}
    assert cells[("b", "citations_supported", ALL)].calibrated.kappa == pytest.approx(-0.84)
    with pytest.raises(ValueError, match="at least 1"):
        agreement_trends(mixed, calibration_weeks=0)


def test_a_cell_without_a_verdict_says_why() -> None:
    """Every cell that cannot say ok or low names what it lacks: too few pairs (and how many), calibration weeks
    still to come, or an undefined kappa; a cell with a verdict has no such reason."""
    data = (pairs("2026-W40", 46, 4) + pairs("2026-W41", 46, 4) + pairs("2026-W42", 46, 4)
            + pairs("2026-W43", 40, 10)
            + pairs("2026-W40", 3, 1, category="consent") + pairs("2026-W43", 5, 2, category="consent"))
    trends = {t.stratum: t for t in agreement_trends(data, calibration_weeks=3, min_pairs=20)}
    assert trends["billing"].no_verdict is None and trends[ALL].no_verdict is None
    consent = trends["consent"]
    assert not consent.low and consent.weeks == ()
    assert consent.no_verdict == "not calibrated: 4 label pairs in the calibration weeks, fewer than 20"
    young = {t.stratum: t for t in agreement_trends(pairs("2026-W40", 46, 4), calibration_weeks=3, min_pairs=20)}
    assert young["billing"].no_verdict == "not calibrated yet: 1 of 3 calibration weeks labelled"
    later = {t.stratum: t for t in agreement_trends(data + pairs("2026-W44", 6, 1), calibration_weeks=3,
                                                    min_pairs=20)}
    assert later["billing"].no_verdict is None  # its latest full week still stands
    sparse = [p for p in data if p[0] != "2026-W43"] + pairs("2026-W43", 6, 1)
    cell = {t.stratum: t for t in agreement_trends(sparse, calibration_weeks=3, min_pairs=20)}["billing"]
    assert cell.no_verdict == ("no week since the calibration has 20 label pairs or more (fewer than 20: "
                               "2026-W43 7)")
    assert cell.skipped == (("2026-W43", 7),)
