"""``ragmon drift backtest``'s output: a progress bar while it replays, then a table per group or JSON.

Owns presentation and the exit code only; the replay is ``ragmon.drift.backtest.backtest``. A range in which not one
feature of one group could be assessed says so loudly and exits 4 (``EXIT_NO_EVIDENCE``): "0 declared drift"
would read as health when the range says nothing at all.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from datetime import datetime
from typing import Any

import typer
from rich.markup import escape
from rich.progress import Progress
from rich.table import Table

from ragmon.cli.common import EXIT_NO_EVIDENCE, console, err_console, fail
from ragmon.config import Settings

#: groups and features named when some were never assessed in the range
NAMED = 10


def run_backtest(settings: Settings, start: datetime, end: datetime, output: str, show_all: bool,
                 open_store: Callable[[Settings], Any]) -> None:
    from ragmon.cli.drift_applied import applied_drift_settings
    from ragmon.drift.backtest.backtest import backtest
    from ragmon.drift.check.check import DriftChecker

    store = open_store(settings)
    checker = DriftChecker(store, applied_drift_settings(store, settings.drift))
    with Progress(console=err_console, transient=True) as bar:
        task = bar.add_task("replaying drift checks", total=None)
        try:
            result = backtest(checker, start, end, progress=lambda done, n: bar.update(task, completed=done, total=n))
        except ValueError as exc:
            raise fail(str(exc)) from None
    if output == "json":
        console.print_json(json.dumps(result.as_dict()))
    else:
        _table(result, checker.settings.sequential.false_alarms_per_day, start, end, show_all)
    if result.nothing_assessed:
        err_console.print(
            f"[bold red]NOTHING ASSESSED[/]: not one feature of one group could be assessed at any of the "
            f"{result.checks} checks from {start:%Y-%m-%d %H:%M} to {end:%Y-%m-%d %H:%M} UTC ({result.not_assessed} "
            "times too few traces or reference windows): this range says nothing about drift. "
            "`ragmon drift check --at TIME --all` gives each test's reason.", highlight=False, soft_wrap=True)
        raise typer.Exit(EXIT_NO_EVIDENCE)


def _table(result: Any, budget: float, start: datetime, end: datetime, show_all: bool) -> None:
    onsets = sum(f.persistent_onsets for f in result.features)
    per_day = result.as_dict()["persistent_onsets_per_day"]
    active = [f for f in result.features if f.active_at_start]
    line = (f"{result.checks} checks of {result.window_seconds // 60} min windows, {start:%Y-%m-%d %H:%M} → "
            f"{end:%Y-%m-%d %H:%M} UTC: ")
    if result.nothing_assessed:
        line += "[bold red]nothing could be assessed[/]"
    else:
        line += (f"[bold]{result.checks_with_drift}[/] declared drift ({result.checks_with_drift / result.checks:.1%} "
                 f"of checks); persistent drift began [bold]{onsets}[/] times")
        if isinstance(per_day, float) and math.isfinite(per_day):
            line += (f" ({per_day:.2f} a day, true drift included; the budget for false alarms, "
                     f"drift.sequential.false_alarms_per_day, is {budget:g})")
        if active:
            line += f"; [bold]{len(active)}[/] persistent alarms were already active at --from"
    console.print(line, highlight=False, soft_wrap=True)
    never = [f for f in result.features if f.assessed == 0]
    if never and not result.nothing_assessed:
        names = ", ".join(f"{f.group.retriever} {f.group.variant} {f.group.stratum} {f.feature}" for f in never[:NAMED])
        more = f" and {len(never) - NAMED} more" if len(never) > NAMED else ""
        console.print(f"[bold yellow]never assessed in the range[/] ({len(never)} of {len(result.features)} group "
                      f"features: too few traces): {escape(names)}{more}", highlight=False, soft_wrap=True)
    table = Table("retriever", "variant", "stratum", "feature", "assessed", "not assessed", "drift", "persistent",
                  "persistent drift began", title="per group and feature", header_style="bold")
    shown = 0
    for f in result.features:
        if not show_all and not (f.drifted or f.persistent_onsets or f.active_at_start):
            continue
        shown += 1
        began = [_since(f)] if f.active_at_start else []
        began += [f"{t:%m-%d %H:%M}" for t in f.persistent_times[:5]]
        more = len(f.persistent_times) - 5
        table.add_row(escape(f.group.retriever), escape(f.group.variant), escape(f.group.stratum), f.feature,
                      str(f.assessed), str(f.not_assessed), str(f.drifted), str(f.persistent_onsets),
                      ", ".join(began) + (f" (+{more})" if more > 0 else ""))
    if shown:
        console.print(table)
    elif result.nothing_assessed:
        console.print("[bold red]no group and feature could be assessed[/]: the replay cannot tell whether any would "
                      "have paged")
    else:
        console.print("no group and feature would have alarmed" if not show_all else "no group in the range")


def _since(f: Any) -> str:
    """When an alarm already active at --from began."""
    if f.active_since is not None:
        return f"already active at --from, since {f.active_since:%m-%d %H:%M}"
    return f"already active at --from, since {f.active_since_before:%m-%d %H:%M} or earlier"
