"""``ragmon drift judge-agreement``: the judge's agreement with reviewers week by week, as the drift role computes it.

Prints, per judge fingerprint, label and stratum, the calibrated kappa, each later week's kappa with its 95%
interval, and whether the latest week is low (what ``RagmonJudgeAgreementLow`` alerts on); a cell that cannot say
ok or low says why (too few label pairs, calibration weeks to come, an undefined kappa). Exit codes: 0 printed
(``--fail-when-low``: 1 when a cell is low); 3 the store is unavailable.
"""

from __future__ import annotations

import json
from enum import StrEnum
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from ragmon.cli.common import console, settings_of


class Format(StrEnum):
    table = "table"
    json = "json"


def _kappa(value: float | None, interval: float | None = None) -> str:
    if value is None:
        return "undefined"
    return f"{value:.2f}" + (f" ±{interval:.2f}" if interval is not None else "")


def judge_agreement(
    ctx: typer.Context,
    fmt: Annotated[Format, typer.Option("--format", help="table or json (stdout holds only the JSON).")] = Format.table,
    fail_when_low: Annotated[bool, typer.Option("--fail-when-low", help="Exit 1 when the latest week of any cell is "
                                                "low (a gate for a judge change).")] = False,
) -> None:
    """Judge drift: Cohen's kappa of the judge's verdicts vs review labels per fingerprint, label and stratum, week by
    week, against the fingerprint's calibration weeks (drift.judge_agreement). Low = the latest week fell below the
    calibrated kappa by more than the 95% interval of the difference. See docs/judges.md, 'Judge drift'."""
    from ragmon.cli.store_open import open_store
    from ragmon.judge_agreement.job import JudgeAgreementJob

    settings = settings_of(ctx)
    trends = JudgeAgreementJob(open_store(settings), settings.drift.judge_agreement, None).compute()
    if fmt == Format.json:
        def week(w: Any) -> dict[str, Any] | None:
            return None if w is None else {"week": w.week, "n": w.n, "kappa": w.kappa, "interval": w.interval}

        console.print_json(json.dumps([{"fingerprint": t.fingerprint, "label": t.label, "stratum": t.stratum,
                                        "calibrated": week(t.calibrated), "weeks": [week(w) for w in t.weeks],
                                        "skipped_weeks": [{"week": w, "n": n} for w, n in t.skipped],
                                        "drop_interval": t.drop_interval, "low": t.low,
                                        "no_verdict": t.no_verdict} for t in trends]))
    elif not trends:
        console.print("no review labels paired with judge scores yet: label traces in the review UI and score them")
    else:
        table = Table("fingerprint", "label", "stratum", "calibrated (weeks)", "weeks after: kappa ±95%", "verdict",
                      title="judge agreement with reviewers, week by week", title_justify="left")
        for t in trends:
            cal = t.calibrated
            why = t.no_verdict
            table.add_row(escape(t.fingerprint), t.label, escape(t.stratum),
                          f"— ({escape(why)})" if cal is None and why else "not yet" if cal is None
                          else f"{_kappa(cal.kappa, cal.interval)} ({cal.week}, n={cal.n})",
                          ", ".join(f"{w.week} {_kappa(w.kappa, w.interval)} (n={w.n})" for w in t.weeks)
                          or (f"— ({escape(why)})" if why and cal is not None else "—"),
                          "[bold red]LOW[/]" if t.low else "no verdict" if why else "ok")  # fmt: skip
        console.print(table)
    if fail_when_low and any(t.low for t in trends):
        raise typer.Exit(1)
