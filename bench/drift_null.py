"""False alarms, pages and power of the drift detector on traffic with the shapes production traffic has.

    python3 bench/drift_null.py --shapes composite --no-power     # per-check and paging false alarms, 32 days a cell
    python3 bench/drift_null.py --shapes composite --no-null      # power, time to page, healthy strata
    python3 bench/drift_null.py --quick                           # a rough look in a few minutes
    python3 bench/drift_null.py --json out.json

Traffic comes from ``ragmon.drift.simulation.traffic`` (four strata; iid, hourly mix variation, trending popular
queries, daily seasonality, routine document updates, and ``composite``: all of them together with questions that have
their own habits). Each check's windows are summarised by ``ragmon.drift.simulation.offline`` exactly as ClickHouse
summarises them — adjusted for the question (``drift.by_query``, the default), count, mean, standard deviation, exact
quantiles where a test reads them (t-digest sketches in ClickHouse) — and decided by the production code: ``assess`` for
the hourly check (the window tests, Benjamini–Hochberg within each stratum, the CUSUM at its share of the paging
budget) and ``watch.look`` for the looks at the window in progress every 5 minutes between checks. Nothing goes
through ClickHouse: numpy only, the fastest path the code has (a check costs about a second at 1,000 traces per
stratum per hour on the 2-core machine; ``bench/drift.py`` measures the ClickHouse side).

Printed per shape and size, no drift anywhere:

* **checks with a false alarm** — share of hourly checks in which any test of any stratum was declared drifted
  (Wilson 95 % interval; checks of one simulated series share their reference, so it is somewhat narrow);
* **pages** — page onsets (a stratum going from nothing paging to something paging: a CUSUM alarm or a watch
  alarm), per stratum per 30 days, with a Wilson interval on the share of stratum-days with an onset (× 30);
  the CUSUM's and the watch's onsets per (stratum, feature) are shown apart.

Power, a drift injected into one of four strata (onset at the start of a window unless said): counted as **paged**
when a page of stratum 0 on the drift's features is raised by the end of the drift's last window (a look or a
check), **by check** when a check's per-check verdict declared it; **healthy** is the share of trials in which a
stratum without drift was declared drifted or paged while the drift lasted (every look and check of it), and the
share of the drift's checks whose per-check verdict declared a stratum without drift; **time to page** (onset at a
random minute) the minutes from onset to the first page.
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ragmon.config import DriftSettings  # noqa: E402
from ragmon.drift.check.watch import look, series_per_day  # noqa: E402
from ragmon.drift.method.assess import Assessed, Detector, Planned, assess  # noqa: E402
from ragmon.drift.method.features import FEATURES, plan_features  # noqa: E402
from ragmon.drift.simulation.draw import Shift  # noqa: E402
from ragmon.drift.simulation.offline import History  # noqa: E402
from ragmon.drift.simulation.traffic import SHAPES, strata  # noqa: E402
from ragmon.stats.intervals import wilson_interval  # noqa: E402

STRATA = 4
SIZES = (200, 1000, 5000)
SETTINGS = DriftSettings()
LOOK_SECONDS = SETTINGS.watch.interval_seconds
WINDOW_SECONDS = SETTINGS.windows.current_seconds
BUDGET = SETTINGS.sequential.false_alarms_per_day
WATCH_BUDGET = BUDGET * SETTINGS.watch.budget_share


def detector() -> Detector:
    """The live check's detector: the CUSUM at its share of the paging budget (``DriftChecker.cusum_budget``)."""
    seq = SETTINGS.sequential
    return Detector(k=seq.k, false_alarms_per_day=BUDGET - WATCH_BUDGET, arl_margin=seq.arl_margin,
                    lookback=seq.lookback_windows, max_pool=SETTINGS.max_pool_windows)


def _plans(shape: str) -> dict[str, list[Planned]]:
    names = [f for f in FEATURES if FEATURES[f].source == "traces"]
    if shape == "doc_updates" or shape.startswith("composite"):
        names.append("newest_version_share")
    plans = plan_features(DriftSettings(features=names))
    return {p.feature.name: [Planned(t.test, t.threshold, t.effect_threshold, t.min_samples) for t in p.tests]
            for p in plans}


@dataclass
class Paging:
    """What pages now, per (stratum, feature): persistent drift at the last check, or a watch alarm in the window in
    progress. Counts onsets per stratum (nothing of the stratum paging → something) and per (stratum, feature)."""

    persistent: set = field(default_factory=set)
    watched: set = field(default_factory=set)
    stratum_onsets: int = 0
    cusum_onsets: int = 0
    watch_onsets: int = 0
    onset_times: list = field(default_factory=list)

    def paging(self) -> set:
        return self.persistent | self.watched

    def _update(self, new_persistent: set, new_watched: set, at: float) -> set:
        before = self.paging()
        strata_before = {k[0] for k in before}
        self.persistent, self.watched = new_persistent, new_watched
        raised = self.paging() - before
        self.stratum_onsets += len({k[0] for k in raised} - strata_before)
        if raised:
            self.onset_times.append(at)
        return raised

    def look(self, alarms: set, at: float) -> set:
        raised = self._update(self.persistent, self.watched | alarms, at)
        self.watch_onsets += len(raised)
        return raised

    def check(self, results: list[Assessed], final: set, at: float) -> set:
        """The check closes the window: its looks' alarms end; persistent drift and the final look's alarms page
        until the next check."""
        persistent = {r.key for r in results if r.cusum is not None and r.cusum.alarm}
        before = self.paging()
        raised = self._update(persistent, final, at)
        self.cusum_onsets += len(raised & persistent - before)
        self.watch_onsets += len(raised - persistent)
        return raised


@dataclass
class HourResult:
    looks: list[tuple[float, set, set]]  # (time, keys alarmed, keys looked at)
    results: list[Assessed]
    final: set  # keys the final look at the complete window alarmed


def run_hour(history: History, plans: dict[str, list[Planned]], det: Detector, *, watch: bool = True,
             shift: Shift | None = None, on_look=None) -> HourResult:
    """Draw the next hour of every stratum (``shift`` into stratum 0), look at it every 5 minutes as it fills, then
    check it — what the daemon does over one window."""
    history.draw(1, shift)
    check = history.check(plans, det)
    start = (history.hours - 1) / 24
    looks = []
    if watch:
        per_day = None
        for j in range(1, int(WINDOW_SECONDS // LOOK_SECONDS)):
            at = start + j * LOOK_SECONDS / 86400
            entries = check.entries(until=at)
            per_day = per_day or series_per_day(entries, det)
            looked = look(entries, elapsed_seconds=j * LOOK_SECONDS, interval_seconds=LOOK_SECONDS,
                          false_alarms_per_day=WATCH_BUDGET, detector=det, per_day=per_day)
            looks.append((at, {x.key for x in looked if x.alarm}, {x.key for x in looked}))
            if on_look is not None and on_look(at, looks[-1][1]):
                break
    entries = check.entries()
    final: set = set()
    if watch:
        final = {x.key for x in look(entries, elapsed_seconds=None, interval_seconds=LOOK_SECONDS,
                                     false_alarms_per_day=WATCH_BUDGET, detector=det) if x.alarm}
    return HourResult(looks, assess(entries, det), final)


def null_run(shape: str, size: int, series: int, days: int, seed: int, *, by_query: bool = True,
             watch: bool = True, progress=None) -> dict[str, object]:
    """Hours of traffic without drift: how many checks declare anything, and how often something starts paging."""
    det = detector()
    plans = _plans(shape)
    alarmed = checks = 0
    stratum_days = 0
    page_days = 0  # stratum-days with a page onset
    onsets = {"stratum": 0, "cusum": 0, "watch": 0}
    features: dict[str, int] = {}
    declared: dict[str, int] = {}  # per feature: the checks that declared it drifted (in some stratum)
    for r in range(series):
        history = History(strata(shape, STRATA, seed * 1000 + r, days=days + det.history / 24 + 2), size,
                          det.history, by_query=by_query)
        history.draw(det.history - 1)
        paging = Paging()
        day_onsets = np.zeros((days, STRATA), bool)
        for h in range(days * 24):
            hour = run_hour(history, plans, det, watch=watch)
            for at, alarms, _ in hour.looks:
                for key in paging.look(alarms, at):
                    day_onsets[h // 24, key[0]] = True
                    features[f"watch {key[1]}"] = features.get(f"watch {key[1]}", 0) + 1
            for key in paging.check(hour.results, hour.final, history.hours / 24):
                day_onsets[h // 24, key[0]] = True
                features[f"cusum {key[1]}"] = features.get(f"cusum {key[1]}", 0) + 1
            checks += 1
            drifted = {x.key[1] for x in hour.results if x.decision.drifted}
            alarmed += bool(drifted)
            for feature in drifted:
                declared[feature] = declared.get(feature, 0) + 1
            if progress is not None and h % 24 == 23:
                progress(r, h // 24 + 1, alarmed, checks, paging.stratum_onsets)
        onsets["stratum"] += paging.stratum_onsets
        onsets["cusum"] += paging.cusum_onsets
        onsets["watch"] += paging.watch_onsets
        stratum_days += days * STRATA
        page_days += int(day_onsets.sum())
    low, high = wilson_interval(alarmed / checks, checks)
    share = page_days / stratum_days
    p_low, p_high = wilson_interval(share, stratum_days)
    return {"checks": checks, "alarmed": alarmed, "rate": alarmed / checks, "low": low, "high": high,
            "days": series * days, "stratum_days": stratum_days, "page_onsets": onsets["stratum"],
            "pages_per_stratum_30d": 30 * onsets["stratum"] / stratum_days,
            "page_days": page_days, "page_days_per_30d": 30 * share, "page_days_low_30d": 30 * p_low,
            "page_days_high_30d": 30 * p_high, "cusum_onsets": onsets["cusum"], "watch_onsets": onsets["watch"],
            "by_feature": features, "declared_by_feature": dict(sorted(declared.items(), key=lambda kv: -kv[1]))}


@dataclass(frozen=True)
class Scenario:
    """A drift of ``hours`` windows in stratum 0, seen on ``features``; ``make(sd, day)`` the shift, given stratum
    0's served σ of top1_score and the day the drift starts; ``random_onset``: it starts at a random minute of its
    first window (time to page)."""

    hours: int
    features: tuple[str, ...]
    make: object
    random_onset: bool = False


SCORES = ("top1_score", "mean_score", "top2_gap")
EMPTY = ("empty_shortlist_rate", "n_results")
SCENARIOS = {
    "drop 0.5σ × 3 h": Scenario(3, SCORES, lambda sd, day: Shift(add=-0.5 * sd)),
    "drop 0.25σ × 3 h": Scenario(3, SCORES, lambda sd, day: Shift(add=-0.25 * sd)),
    "empty shortlists +10 pts × 1 h": Scenario(1, EMPTY, lambda sd, day: Shift(extra_empty=0.10)),
    "scores × 0.85 (time to page)": Scenario(3, SCORES, lambda sd, day: Shift(scale=0.85, since=day), True),
    "scores × 0.8 × 1 h": Scenario(1, SCORES, lambda sd, day: Shift(scale=0.8)),
}
POWER_PLAN = [("drop 0.5σ × 3 h", (200,)), ("drop 0.25σ × 3 h", (200,)), ("empty shortlists +10 pts × 1 h", (200,)),
              ("scores × 0.85 (time to page)", (200,))]


def power_run(shape: str, size: int, trials: int, seed: int, scenario: str, histories: int = 4, *,
              by_query: bool = True, watch: bool = True) -> dict[str, object]:
    """Trials of one drift, spread over ``histories`` independent eight-day histories (a cell's result depends on
    its reference history more than on its trials); every trial continues its history with its own draws."""
    det = detector()
    plans = _plans(shape)
    sc = SCENARIOS[scenario]
    bases = []
    for b in range(max(1, min(histories, trials))):
        base = History(strata(shape, STRATA, seed + 7919 * b, days=(det.history + sc.hours) / 24 + 3), size,
                       det.history, by_query=by_query)
        # the drift starts at 08:00, where the seasonal volume is its daily mean (``size``), on a weekday
        base.draw(det.history + (8 - det.history) % 24)
        bases.append((base, base.served_sd(0, "top1_score", det.reference)))
    rng = np.random.default_rng(seed + 3)
    seeds = np.random.SeedSequence(seed + 1).spawn(trials)
    paged = by_check = healthy = 0
    checks = healthy_checks = 0  # checks during a drift, and those that declared a healthy stratum drifted
    minutes: list[float] = []
    for t in range(trials):
        base, sd = bases[t % len(bases)]
        history = copy.deepcopy(base)
        for st in history.strata:
            st.rng = np.random.default_rng(seeds[t].spawn(1)[0].generate_state(1)[0] + hash(st.base) % 997)
        start = history.hours / 24
        onset = start + (float(rng.uniform(0, 60)) / 1440 if sc.random_onset else 0.0)
        shift = sc.make(sd, onset)  # type: ignore[operator]
        hit = hit_check = sick = False
        first: float | None = None
        for _ in range(sc.hours):
            def on_look(at: float, alarms: set) -> bool:
                nonlocal first, sick
                if any(k[0] != 0 for k in alarms):
                    sick = True
                if first is None and any(k[0] == 0 and k[1] in sc.features for k in alarms):
                    first = at
                return False
            hour = run_hour(history, plans, det, watch=watch, shift=shift, on_look=on_look)
            results = hour.results
            end = history.hours / 24
            mine = [r for r in results if r.key[0] == 0 and r.key[1] in sc.features]
            hit_check = hit_check or any(r.decision.drifted for r in mine)
            if first is None and (any(r.cusum is not None and r.cusum.alarm for r in mine)
                                  or any(k[0] == 0 and k[1] in sc.features for k in hour.final)):
                first = end
            sick = sick or any((r.decision.drifted or (r.cusum is not None and r.cusum.alarm))
                               for r in results if r.key[0] != 0) or any(k[0] != 0 for k in hour.final)
            checks += 1
            healthy_checks += any(r.decision.drifted for r in results if r.key[0] != 0)
        hit = first is not None
        paged += hit
        by_check += hit_check
        healthy += sick
        if first is not None:
            minutes.append((first - onset) * 1440)
    low, high = wilson_interval(paged / trials, trials)
    h_low, h_high = wilson_interval(healthy / trials, trials)
    c_low, c_high = wilson_interval(healthy_checks / checks, checks)
    out: dict[str, object] = {"trials": trials, "paged": paged, "rate": paged / trials, "low": low, "high": high,
                              "by_check": by_check / trials, "healthy": healthy / trials, "healthy_low": h_low,
                              "healthy_high": h_high, "checks": checks, "healthy_checks": healthy_checks / checks,
                              "healthy_checks_low": c_low, "healthy_checks_high": c_high, "histories": len(bases)}
    if minutes:
        out.update({"minutes_median": float(np.median(minutes)), "minutes_p90": float(np.percentile(minutes, 90)),
                    "minutes": [round(m, 1) for m in minutes]})
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shapes", default=",".join(SHAPES), help="comma-separated traffic shapes")
    ap.add_argument("--sizes", default=",".join(map(str, SIZES)), help="traces per stratum per window")
    ap.add_argument("--series", type=int, default=4, help="independent simulated series per shape and size")
    ap.add_argument("--days", type=int, default=8, help="simulated days of hourly checks per series (after 8 days "
                    "of history): --series × --days ≥ 30 for paging per month")
    ap.add_argument("--trials", type=int, default=40, help="trials per power scenario")
    ap.add_argument("--histories", type=int, default=4,
                    help="independent eight-day histories the trials of a power scenario are spread over")
    ap.add_argument("--power-shapes", default="composite", help="traffic shapes of the power scenarios")
    ap.add_argument("--quick", action="store_true", help="2 series × 2 days, 10 trials")
    ap.add_argument("--no-power", action="store_true", help="false alarms only")
    ap.add_argument("--no-null", action="store_true", help="power only")
    ap.add_argument("--no-watch", action="store_true", help="no looks at the window in progress (checks only)")
    ap.add_argument("--scenarios",
                    help=f"comma-separated power scenarios (default: {', '.join(s for s, _ in POWER_PLAN)}; "
                    f"known: {', '.join(SCENARIOS)})")
    ap.add_argument("--power-sizes", help="traces per stratum per window of the power scenarios (default: 200)")
    ap.add_argument("--seed", type=int, default=20261206)
    ap.add_argument("--no-by-query", action="store_true",
                    help="features as served (drift.by_query = false) instead of against each question's level")
    ap.add_argument("--json", type=Path, help="also write every figure as JSON")
    args = ap.parse_args(argv)
    if args.quick:
        args.series, args.days, args.trials = 2, 2, 10
    shapes = [s.strip() for s in args.shapes.split(",") if s.strip()]
    sizes = [int(x) for x in args.sizes.split(",")]
    console = Console(width=200)
    started = time.perf_counter()
    out: dict[str, object] = {"settings": {"alpha": SETTINGS.alpha, "budget": BUDGET, "watch_budget": WATCH_BUDGET,
                                           "look_seconds": LOOK_SECONDS, "seed": args.seed,
                                           "by_query": not args.no_by_query, "watch": not args.no_watch}}
    table = Table("shape", "traces/stratum/h", "days", "checks", "checks with a false alarm (95% CI)",
                  "pages / stratum / 30 d", "stratum-days paged / 30 d (95% CI)", "onsets cusum / watch",
                  title="no drift: false alarms (4 strata, default features and tests)")
    nulls = []
    for shape in ([] if args.no_null else shapes):
        for size in sizes:
            cell = time.perf_counter()

            def progress(r: int, day: int, alarmed: int, checks: int, onsets: int, shape=shape, size=size) -> None:
                console.print(f"  {shape} {size} series {r + 1} day {day}: {alarmed}/{checks} checks alarmed, "
                              f"{onsets} page onsets [{time.perf_counter() - started:.0f}s]", highlight=False)

            r = null_run(shape, size, args.series, args.days, args.seed, by_query=not args.no_by_query,
                         watch=not args.no_watch, progress=progress)
            r["seconds"] = round(time.perf_counter() - cell, 1)
            nulls.append({"shape": shape, "size": size, **r})
            table.add_row(shape, f"{size:,}", str(r["days"]), str(r["checks"]),
                          f"{r['rate']:.1%} ({r['low']:.1%}–{r['high']:.1%})", f"{r['pages_per_stratum_30d']:.2f}",
                          f"{r['page_days_per_30d']:.2f} ({r['page_days_low_30d']:.2f}–{r['page_days_high_30d']:.2f})",
                          f"{r['cusum_onsets']} / {r['watch_onsets']}")
            console.print(f"{shape} {size}: {json.dumps({k: v for k, v in r.items()})}", highlight=False)
            if args.json:
                args.json.write_text(json.dumps({**out, "null": nulls}, indent=1, default=str) + "\n", encoding="utf-8")
    if nulls:
        console.print(table)
    out["null"] = nulls
    if not args.no_power:
        ptable = Table("scenario", "shape", "traces/stratum/h", "paged (95% CI)", "by check",
                       "trials with a healthy stratum declared or paged (95% CI)",
                       "checks declaring a healthy stratum (95% CI)", "minutes to page (median, 90th)",
                       title="power: a drift in one of four strata")
        powers = []
        wanted = None if args.scenarios is None else [x.strip() for x in args.scenarios.split(",")]
        plan = POWER_PLAN if wanted is None else [(s, (200,)) for s in wanted]
        if args.power_sizes:
            plan = [(s, tuple(int(x) for x in args.power_sizes.split(","))) for s, _ in plan]
        for scenario, scenario_sizes in plan:
            for shape in [s.strip() for s in args.power_shapes.split(",") if s.strip()]:
                for size in scenario_sizes:
                    cell = time.perf_counter()
                    r = power_run(shape, size, args.trials, args.seed + 1, scenario, args.histories,
                                  by_query=not args.no_by_query, watch=not args.no_watch)
                    r["seconds"] = round(time.perf_counter() - cell, 1)
                    powers.append({"scenario": scenario, "shape": shape, "size": size, **r})
                    ttp = (f"{r['minutes_median']:.0f}, {r['minutes_p90']:.0f}" if "minutes_median" in r else "—")
                    ptable.add_row(scenario, shape, f"{size:,}", f"{r['rate']:.0%} ({r['low']:.0%}–{r['high']:.0%})",
                                   f"{r['by_check']:.0%}",
                                   f"{r['healthy']:.0%} ({r['healthy_low']:.0%}–{r['healthy_high']:.0%})",
                                   f"{r['healthy_checks']:.1%} ({r['healthy_checks_low']:.1%}–"
                                   f"{r['healthy_checks_high']:.1%})", ttp)
                    console.print(f"{scenario} {shape} {size}: {json.dumps(r)} "
                                  f"[{time.perf_counter() - started:.0f}s]", highlight=False)
                    if args.json:
                        args.json.write_text(json.dumps({**out, "power": powers}, indent=1, default=str) + "\n",
                                             encoding="utf-8")
        console.print(ptable)
        out["power"] = powers
    console.print(f"{time.perf_counter() - started:.0f} s")
    if args.json:
        args.json.write_text(json.dumps(out, indent=1, default=str) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
