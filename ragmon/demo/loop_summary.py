"""Printing the demo's triage queue and judge drift, each next to what the scenario injected or simulated.

Renderables only (``summary.py`` prints them in order); they read the results, never the store.
"""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from ragmon.demo.judge_drift import REVIEWERS, JudgeDriftDemo
from ragmon.demo.scenario import Scenario
from ragmon.demo.triage import TriageDemo
from ragmon.judge.agreement_trend import ALL, WeekAgreement


def triage_renderable(t: TriageDemo, s: Scenario) -> RenderableType:
    q = t.queue
    burst = sum(t.burst.values())
    head = Text(
        f"Negative-feedback triage: week {q.week}: {len(q.items)} of {q.population} thumbs-down production traces "
        f"queued (seed {q.seed}). Injected: {burst} thumbs-down in stratum {s.incident_stratum} in the last "
        f"{s.incident_hours:g}h, on answers that assert what their passages do not say (the incident), and "
        f"{sum(t.background.values())} background thumbs-down. No cause is simulated: reviewers give each queued "
        f"trace one at /review/triage/{q.week} (`ragmon demo --keep-serving`); `ragmon review triage --week {q.week}` "
        "reports the causes given.")
    table = Table(title=f"Triage queue {q.week}", title_justify="left")
    for col in ("stratum", "thumbs-down injected", "of which the burst", "queued for triage"):
        table.add_column(col, justify="left" if col == "stratum" else "right")
    queued = t.queued
    for stratum in t.strata():
        b, bg = t.burst.get(stratum, 0), t.background.get(stratum, 0)
        table.add_row(stratum, str(b + bg), str(b), str(queued.get(stratum, 0)))
    return Group(head, table)


def _kappa(w: WeekAgreement | None) -> str:
    if w is None:
        return "–"
    kappa = "undefined" if w.kappa is None else f"{w.kappa:.2f}"
    return kappa + (f" ±{w.interval:.2f}" if w.interval is not None else "") + f" (n={w.n})"


def judge_drift_renderable(j: JudgeDriftDemo) -> RenderableType:
    head = Text(
        f"Judge drift: {j.labels:,} review labels by SIMULATED reviewers ({', '.join(REVIEWERS)}) on the real review "
        f"samples of {j.weeks[0]}..{j.weeks[-1]}: they agree with what the answers say {j.agreement:.0%} of the time, "
        f"and {j.drifted_agreement:.0%} in stratum {j.stratum} in {j.weeks[-1]}. Kappa of the heuristic judge vs "
        "those labels, as `ragmon drift judge-agreement` and RagmonJudgeAgreementLow see it:")
    shown = [tr for tr in j.trends if tr.calibrated is not None]
    weeks = sorted({w.week for tr in shown for w in tr.weeks})
    table = Table(title="Judge agreement (SIMULATED reviewers), kappa ±95%", title_justify="left")
    for col in ("label", "stratum", "calibrated (weeks)", *weeks, "verdict"):
        table.add_column(col)
    for tr in sorted(shown, key=lambda tr: (tr.label, tr.stratum == ALL, tr.stratum)):
        by_week, cal = {w.week: w for w in tr.weeks}, tr.calibrated
        if cal is None:
            continue
        table.add_row(tr.label, tr.stratum, f"{_kappa(cal)} {cal.week}", *(_kappa(by_week.get(w)) for w in weeks),
                      "LOW" if tr.low else "ok")
    if not shown:
        table.add_row("none", *[""] * (3 + len(weeks)))
    return Group(head, table)
