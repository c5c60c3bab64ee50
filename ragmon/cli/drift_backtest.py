"""``ragmon drift backtest``'s output: a progress bar while it replays, then a table per group or JSON.

Owns presentation only; the replay is ``ragmon.drift.backtest``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from datetime import datetime
from typing import Any

from rich.progress import Progress
from rich.table import Table

from ragmon.cli.common import console, err_console, fail
from ragmon.config import Settings


def run_backtest(settings: Settings, start: datetime, end: datetime, output: str, show_all: bool,
                 open_store: Callable[[Settings], Any]) -> None:
    from ragmon.cli.drift_cmd import applied_drift_settings
    from ragmon.drift.backtest import backtest
    from ragmon.drift.check import DriftChecker

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
        return
    summary = result.as_dict()
    per_day = summary["persistent_onsets_per_day"]
    console.print(
        f"{result.checks} checks of {result.window_seconds // 60} min windows, {start:%Y-%m-%d %H:%M} → "
        f"{end:%Y-%m-%d %H:%M} UTC: [bold]{result.checks_with_drift}[/] declared drift "
        f"({result.checks_with_drift / result.checks:.1%} of checks); persistent drift began "
        f"[bold]{sum(f.persistent_onsets for f in result.features)}[/] times "
        f"({per_day:.2f} a day, true drift included; the budget for false alarms, drift.sequential.false_alarms_per_day, is "
        f"{checker.settings.sequential.false_alarms_per_day:g})" if isinstance(per_day, float) and math.isfinite(per_day)
        else f"{result.checks} checks", highlight=False, soft_wrap=True)
    if result.skipped_features:
        console.print(f"not replayed (another window length): {', '.join(result.skipped_features)}",
                      highlight=False, soft_wrap=True)
    table = Table("retriever", "variant", "stratum", "feature", "assessed", "not assessed", "drift", "persistent",
                  "persistent drift began", title="per group and feature", header_style="bold")
    shown = 0
    for f in result.features:
        if not show_all and not (f.drifted or f.persistent_onsets):
            continue
        shown += 1
        times = ", ".join(f"{t:%m-%d %H:%M}" for t in f.persistent_times[:5])
        more = len(f.persistent_times) - 5
        table.add_row(f.group.retriever, f.group.variant, f.group.stratum, f.feature, str(f.assessed),
                      str(f.not_assessed), str(f.drifted), str(f.persistent_onsets),
                      times + (f" (+{more})" if more > 0 else ""))
    if shown:
        console.print(table)
    else:
        console.print("no group and feature would have alarmed" if not show_all else "no group in the range")
