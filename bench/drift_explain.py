"""How often ``drift explain`` ranks the true cause of a simulated incident first.

    python3 bench/drift_explain.py                 # 25 trials of each incident kind, 500 traces per window
    python3 bench/drift_explain.py --trials 5      # a quick look
    python3 bench/drift_explain.py --json out.json

Each trial is a group of its own in one chDB store: ``ragmon.drift.simulation.incidents`` writes the current hour and
the same hour of the seven days before (the reference windows of the default drift settings: an hour against the same
hour of the previous week) with an incident of known cause in the current hour (a stale index version, a source
dropped, a new question type, a model change; share and severity drawn per trial), then ``drift explain`` runs on
the real store (the SQL in ClickHouse, the decomposition in numpy) and the rank of the true cause's dimension is
recorded. Printed per kind: the share of trials in which the true cause ranked first (Wilson 95 % interval),
whether its top segment was the incident's, the median share of Δ its top segment explained, the median time;
then a negative control (no incident): how high the best dimension's score gets by chance, against its median under
an incident.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
from pydantic import SecretStr
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ragmon.config import DriftSettings, StoreSettings  # noqa: E402
from ragmon.drift.explain.explain_run import parse_group, run_explain  # noqa: E402
from ragmon.drift.simulation.incidents import KINDS, Traffic, draw_incident, insert  # noqa: E402
from ragmon.stats.intervals import wilson_interval  # noqa: E402
from ragmon.store.clickhouse import ClickHouseStore  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trials", type=int, default=25, help="trials per incident kind")
    ap.add_argument("--per-window", type=int, default=500, help="traces per hourly window")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--verbose", action="store_true", help="print each trial's top dimensions")
    args = ap.parse_args()
    now = datetime(2026, 12, 5, 10, 0, tzinfo=UTC)
    settings = DriftSettings()
    out: dict[str, dict[str, object]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        store = ClickHouseStore.open(StoreSettings(dsn=SecretStr(f"chdb://{tmp}"), database="bench_explain"))
        rng = np.random.default_rng(args.seed)
        for kind in KINDS:
            firsts, segments, shares, seconds = [], [], [], []
            scores: list[float] = []
            for trial in range(args.trials):
                incident = draw_incident(kind, rng)
                group = parse_group(f"hybrid@v1/production/{kind}-{trial}")
                traffic = Traffic(np.random.default_rng([args.seed, trial, len(kind)]))
                for day in range(7, -1, -1):
                    start = now - timedelta(hours=1) - timedelta(days=day)
                    cols = traffic.window(args.per_window, start, 3600, incident if day == 0 else None)
                    insert(store, cols, retriever="hybrid@v1", variant="production", stratum=group.stratum,
                           run_id=f"{kind}-{trial}-{day}")
                started = time.monotonic()
                result = run_explain(store, settings, group, "top1_score", now, now=now, seed=trial)
                seconds.append(time.monotonic() - started)
                top = result.explanation.dimensions[0]
                scores.append(top.score)
                if args.verbose:
                    print(kind, trial, f"share={incident.share:.2f} drop={incident.drop:.2f}", [
                        (d.dimension, round(d.score, 2), d.top.value[:20] if d.top else None)
                        for d in result.explanation.dimensions[:4]])
                firsts.append(top.dimension == incident.cause)
                cause = next(d for d in result.explanation.dimensions if d.dimension == incident.cause)
                segments.append(cause.top is not None and cause.top.value == incident.segment)
                shares.append(cause.top.explained.estimate if cause.top else float("nan"))
            k = sum(firsts)
            lo, hi = wilson_interval(k / len(firsts), len(firsts))
            out[kind] = {"cause": KINDS[kind], "trials": len(firsts), "first": k, "share_first": k / len(firsts),
                         "wilson_low": lo, "wilson_high": hi, "top_segment_right": sum(segments),
                         "median_explained": statistics.median(shares), "median_seconds": statistics.median(seconds),
                         "median_top_score": statistics.median(scores)}
        # the negative control: no incident at all — how high does the best dimension score by chance?
        quiet = []
        for trial in range(args.trials):
            group = parse_group(f"hybrid@v1/production/quiet-{trial}")
            traffic = Traffic(np.random.default_rng([args.seed, trial, 99]))
            for day in range(7, -1, -1):
                insert(store, traffic.window(args.per_window, now - timedelta(hours=1, days=day), 3600),
                       retriever="hybrid@v1", variant="production", stratum=group.stratum, run_id=f"q-{trial}-{day}")
            result = run_explain(store, settings, group, "top1_score", now, now=now, seed=trial)
            quiet.append(result.explanation.dimensions[0].score)
    quiet_sorted = sorted(quiet)
    out_quiet = {"trials": len(quiet), "median_top_score": statistics.median(quiet),
                 "max_top_score": quiet_sorted[-1]}
    total = sum(int(v["first"]) for v in out.values())  # type: ignore[call-overload]
    trials = sum(int(v["trials"]) for v in out.values())  # type: ignore[call-overload]
    table = Table("incident", "true cause", "ranked first", "95% interval", "top segment right", "explained (median)",
                  "time (median)", title=f"drift explain on simulated incidents, {args.per_window} traces per window")
    for kind, v in out.items():
        table.add_row(kind, str(v["cause"]), f"{v['first']}/{v['trials']} ({v['share_first']:.0%})",
                      f"{v['wilson_low']:.0%}–{v['wilson_high']:.0%}", f"{v['top_segment_right']}/{v['trials']}",
                      f"{v['median_explained']:.0%}", f"{v['median_seconds']:.2f}s")
    console = Console(width=140)
    console.print(table)
    console.print(f"true cause ranked first in {total}/{trials} trials ({total / trials:.0%})")
    console.print("top dimension's score (lower 95% bound of the excess share): median "
                  + ", ".join(f"{k} {v['median_top_score']:.2f}" for k, v in out.items())
                  + f"; with no incident (negative control, {len(quiet)} trials): median "
                  f"{out_quiet['median_top_score']:.2f}, max {out_quiet['max_top_score']:.2f}")
    if args.json is not None:
        args.json.write_text(json.dumps({"per_window": args.per_window, "kinds": out, "first": total,
                                         "trials": trials, "no_incident": out_quiet}, indent=2))


if __name__ == "__main__":
    main()
