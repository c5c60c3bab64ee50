"""False alarms and power of the drift detector on traffic with the shapes production traffic has.

    python3 bench/drift_null.py              # every shape at 200, 1,000 and 5,000 traces per stratum per window
    python3 bench/drift_null.py --quick      # fewer simulated series (a rough look in a minute or two)
    python3 bench/drift_null.py --json out.json

Traffic comes from ``ragmon.drift.traffic`` (four strata; iid, hourly mix variation, trending popular queries,
daily seasonality, routine document updates), summarised per window exactly as ClickHouse summarises it (count,
mean, standard deviation, quantiles at 101 levels — exact quantiles here, t-digest there), and checked by the
production detector (``ragmon.drift.assess``) with the default features, tests and thresholds: a 7-day reference
of hourly windows at the same hour, BH at alpha = 0.05 over the whole check, CUSUM at the default budget.

Printed per shape and window size:

* **checks with a false alarm** — share of checks (no drift anywhere) in which any test of any stratum was
  declared drifted, with a Wilson 95 % interval (checks of one simulated series share their reference, so
  the interval is somewhat narrower than it should be);
* **CUSUM false alarms per day** — alarm onsets per simulated day across every stratum and feature (the
  budget is drift.false_alarms_per_day);
* **power** — share of trials in which an injected shift of one stratum was caught: a 0.5σ score shift in one
  window (200/stratum), a 0.25σ shift persisting 3 windows (1,000/stratum, caught by the third), scores ×0.8
  and +10 points of empty shortlists in one window (every size from 50, caught in that window or pooled), +10
  points of empty shortlists lasting 2 windows at 50/stratum (caught by the end of the second: a rare rate's
  block is pooled until it expects an event), a stale index (document updates, caught within 24 hours).
"""

from __future__ import annotations

import argparse
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
from ragmon.drift.assess import Assessed, Detector, Entry, Planned, assess  # noqa: E402
from ragmon.drift.by_query import adjust_by_query, rate_by_query  # noqa: E402
from ragmon.drift.features import FEATURES, plan_features  # noqa: E402
from ragmon.drift.series import Series  # noqa: E402
from ragmon.drift.summary import ContinuousSummary, RateSummary  # noqa: E402
from ragmon.drift.traffic import NO_SHIFT, SHAPES, Draw, Shift, Stratum, strata  # noqa: E402
from ragmon.metrics.intervals import wilson_interval

STRATA = 4
SIZES = (200, 1000, 5000)


def _plans(shape: str) -> dict[str, list[Planned]]:
    names = [f for f in FEATURES if FEATURES[f].source == "traces"]
    if shape == "doc_updates":
        names.append("newest_version_share")
    plans = plan_features(DriftSettings(features=names))
    return {p.feature.name: [Planned(t.test, t.threshold, t.effect_threshold, t.min_samples) for t in p.tests]
            for p in plans}


def _summary(values: np.ndarray, kind: str) -> ContinuousSummary | RateSummary:
    return RateSummary.from_samples(values) if kind == "rate" else ContinuousSummary.from_samples(values)


@dataclass
class History:
    """Per stratum and feature, per-window summaries oldest first (appended as windows are drawn); for the
    query-adjusted features (``Feature.by_query``) the per-trace values and questions instead, adjusted per check
    against that check's reference (``ragmon.drift.by_query``, as the SQL does)."""

    strata: list[Stratum]
    per_window: int
    summaries: dict[tuple[int, str], list] = field(default_factory=dict)
    raw: dict[tuple[int, str], list[tuple[np.ndarray, np.ndarray]]] = field(default_factory=dict)
    hours: int = 0
    by_query: bool = True

    def draw(self, windows: int, shift: Shift | None = None) -> None:
        for _ in range(windows):
            for s, st in enumerate(self.strata):
                self.add(s, st.draw(self.per_window, self.hours % 24, self.hours / 24,
                                    shift if shift is not None and s == 0 else NO_SHIFT))
            self.hours += 1

    def add(self, s: int, draw: Draw) -> None:
        for name, values in draw.features().items():
            keys = draw.questions(name)
            if self.by_query and FEATURES[name].by_query and keys is not None:
                self.raw.setdefault((s, name), []).append((keys, values))
            else:
                self.summaries.setdefault((s, name), []).append(_summary(values, FEATURES[name].kind))

    def served_sd(self, s: int, name: str, windows: int) -> float:
        """The standard deviation of a feature's served values over the last ``windows`` windows, pooled."""
        if (s, name) in self.raw:
            values = np.concatenate([v for _, v in self.raw[s, name][-windows:]])
            return float(np.nanstd(values))
        ref = [x for x in self.summaries[s, name][-windows:] if x.n]
        return float(np.sqrt(np.average([x.std ** 2 + x.mean ** 2 for x in ref], weights=[x.n for x in ref])
                             - np.average([x.mean for x in ref], weights=[x.n for x in ref]) ** 2))

    def entries(self, plans: dict[str, list[Planned]], detector: Detector, current: int = 0) -> list[Entry]:
        """Entries of the check ``current`` windows before the newest (window 0 that check's current window)."""
        out = []
        for (s, name), sums in self.summaries.items():
            if name in plans:
                end = len(sums) - current
                out.append(Entry((s, name), plans[name], Series.from_summaries(sums[max(0, end - detector.history):end][::-1])))
        for (s, name), windows in self.raw.items():
            if name in plans:
                end = len(windows) - current
                newest_first = windows[max(0, end - detector.history):end][::-1]
                reference = range(1, min(detector.reference, len(newest_first) - 1) + 1)
                if FEATURES[name].kind == "rate":
                    summaries = rate_by_query(newest_first, reference)
                else:
                    summaries = [_summary(v, "continuous") for v in adjust_by_query(newest_first, reference)]
                out.append(Entry((s, name), plans[name], Series.from_summaries(summaries)))
        return out


def _caught(results: list[Assessed], features: tuple[str, ...], *, cusum: bool) -> bool:
    """Did the check declare drift (or, with ``cusum``, a persistent drift) in stratum 0 on these features?"""
    return any((r.decision.drifted or (cusum and r.cusum is not None and r.cusum.alarm))
               for r in results if r.key[0] == 0 and r.key[1] in features)


def null_run(shape: str, size: int, series: int, checks: int, detector: Detector, seed: int,
             by_query: bool = True) -> dict[str, float]:
    """Checks over traffic without drift: how many declare anything, and how often the CUSUM starts an alarm."""
    plans = _plans(shape)
    alarmed = total = onsets = 0
    for r in range(series):
        windows = detector.history + checks - 1
        history = History(strata(shape, STRATA, seed * 1000 + r, days=windows / 24 + 1), size, by_query=by_query)
        history.draw(windows)
        was: set = set()
        for current in range(checks - 1, -1, -1):
            results = assess(history.entries(plans, detector, current), detector)
            total += 1
            alarmed += any(x.decision.drifted for x in results)
            now = {x.key for x in results if x.cusum is not None and x.cusum.alarm}
            onsets += len(now - was)
            was = now
    low, high = wilson_interval(alarmed / total if total else 0.0, total)
    return {"checks": total, "alarmed": alarmed, "rate": alarmed / total, "low": low, "high": high,
            "cusum_per_day": onsets / (total / detector.windows_per_day)}


SCENARIOS = {
    # name: (windows the drift lasts, features that show it, the shift given stratum 0's score σ)
    "shift 0.5σ": (1, ("top1_score", "mean_score"), lambda sd, start: Shift(add=0.5 * sd)),
    "shift 0.25σ × 3 windows": (3, ("top1_score", "mean_score"), lambda sd, start: Shift(add=0.25 * sd)),
    "scores × 0.8": (1, ("top1_score", "mean_score", "top2_gap"), lambda sd, start: Shift(scale=0.8)),
    "empty shortlists +10 pts": (1, ("empty_shortlist_rate", "n_results"),
                                 lambda sd, start: Shift(extra_empty=0.10)),
    "empty shortlists +10 pts × 2 windows": (2, ("empty_shortlist_rate", "n_results"),
                                             lambda sd, start: Shift(extra_empty=0.10)),
    "stale index (24 h)": (24, ("newest_version_share",), lambda sd, start: Shift(stale_since=start)),
}


def power_run(shape: str, size: int, trials: int, detector: Detector, seed: int, scenario: str,
              histories: int = 4, by_query: bool = True) -> dict[str, float]:
    """Share of trials in which a drift injected into stratum 0 was caught by the end of its last window, by the
    per-check verdict or the CUSUM (``by_check``: by the per-check verdict alone). The trials are spread over
    ``histories`` independent eight-day histories before the drift (a cell's result depends on its reference
    history more than on the trials: on trending traffic one history gave 32 % and another 75 % for the same
    drift); every trial continues its history with its own draws."""
    import copy

    plans = _plans(shape)
    windows, features, make = SCENARIOS[scenario]
    bases = []
    for b in range(max(1, min(histories, trials))):
        base = History(strata(shape, STRATA, seed + 7919 * b, days=(detector.history + windows) / 24 + 2), size,
                       by_query=by_query)
        # the drift starts at 08:00, where the seasonal shape's volume is its daily mean (``size``)
        base.draw(detector.history + (8 - detector.history) % 24)
        bases.append((base, base.served_sd(0, "top1_score", detector.reference)))
    caught = by_check = 0
    seeds = np.random.SeedSequence(seed + 1).spawn(trials)
    for t in range(trials):
        base, sd = bases[t % len(bases)]
        history = copy.deepcopy(base)
        for st in history.strata:
            st.rng = np.random.default_rng(seeds[t].spawn(1)[0].generate_state(1)[0] + hash(st.base) % 997)
        shift = make(sd, history.hours / 24)
        hit = hit_check = False
        for _ in range(windows):  # the drift has lasted one more window; the check runs at its end
            history.draw(1, shift)  # into stratum 0; the other strata go on without drift
            results = assess(history.entries(plans, detector), detector)
            hit_check = hit_check or _caught(results, features, cusum=False)
            hit = hit or _caught(results, features, cusum=True)
            if hit and hit_check:
                break
        caught += hit
        by_check += hit_check
    low, high = wilson_interval(caught / trials if trials else 0.0, trials)
    return {"trials": trials, "caught": caught, "rate": caught / trials, "low": low, "high": high,
            "by_check": by_check / trials, "histories": len(bases)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shapes", default=",".join(SHAPES), help="comma-separated traffic shapes")
    ap.add_argument("--sizes", default=",".join(map(str, SIZES)), help="traces per stratum per window")
    ap.add_argument("--series", type=int, default=6, help="independent simulated series per shape and size")
    ap.add_argument("--checks", type=int, default=48, help="hourly checks per series (after 8 days of history)")
    ap.add_argument("--trials", type=int, default=40, help="trials per power scenario")
    ap.add_argument("--histories", type=int, default=4,
                    help="independent eight-day histories the trials of a power scenario are spread over")
    ap.add_argument("--quick", action="store_true", help="2 series × 24 checks, 15 trials")
    ap.add_argument("--no-power", action="store_true", help="false alarms only")
    ap.add_argument("--no-null", action="store_true", help="power only")
    ap.add_argument("--scenarios", help="comma-separated power scenarios (default: all)")
    ap.add_argument("--seed", type=int, default=20261203)
    ap.add_argument("--no-by-query", action="store_true",
                    help="score features as served (drift.by_query = false) instead of against each question's level")
    ap.add_argument("--json", type=Path, help="also write every figure as JSON")
    args = ap.parse_args(argv)
    if args.quick:
        args.series, args.checks, args.trials = 2, 24, 15
    shapes = [s.strip() for s in args.shapes.split(",") if s.strip()]
    sizes = [int(x) for x in args.sizes.split(",")]
    detector = Detector()
    console = Console()
    started = time.perf_counter()
    out: dict[str, object] = {"detector": detector.__dict__ if hasattr(detector, "__dict__") else str(detector)}
    table = Table("shape", "traces/stratum/window", "checks", "checks with a false alarm (95% CI)",
                  "CUSUM false alarms/day", title="no drift: false alarms (4 strata, default features and tests)")
    nulls = []
    for shape in ([] if args.no_null else shapes):
        for size in sizes:
            r = null_run(shape, size, args.series, args.checks, detector, args.seed, not args.no_by_query)
            nulls.append({"shape": shape, "size": size, **r})
            table.add_row(shape, f"{size:,}", str(r["checks"]),
                          f"{r['rate']:.1%} ({r['low']:.1%}–{r['high']:.1%})", f"{r['cusum_per_day']:.2f}")
            console.print(f"  {shape} {size}: {r['rate']:.1%} [{time.perf_counter() - started:.0f}s]",
                          highlight=False)
    if nulls:
        console.print(table)
    out["null"] = nulls
    if not args.no_power:
        ptable = Table("scenario", "shape", "traces/stratum/window", "caught (95% CI)", "by the per-check verdict",
                       title="power: a drift injected into one of four strata")
        powers = []
        plan = [("shift 0.5σ", (200,)), ("shift 0.25σ × 3 windows", (1000,)),
                ("scores × 0.8", (50, 200, 1000, 5000)), ("empty shortlists +10 pts", (50, 200, 1000, 5000)),
                ("empty shortlists +10 pts × 2 windows", (50,))]
        wanted = None if args.scenarios is None else {x.strip() for x in args.scenarios.split(",")}
        for scenario, scenario_sizes in plan:
            if wanted is not None and scenario not in wanted:
                continue
            for shape in shapes:
                for size in scenario_sizes:
                    r = power_run(shape, size, args.trials, detector, args.seed + 1, scenario, args.histories,
                                  not args.no_by_query)
                    powers.append({"scenario": scenario, "shape": shape, "size": size, **r})
                    ptable.add_row(scenario, shape, f"{size:,}", f"{r['rate']:.0%} ({r['low']:.0%}–{r['high']:.0%})",
                                   f"{r['by_check']:.0%}")
        if "doc_updates" in shapes and (wanted is None or "stale index (24 h)" in wanted):
            for size in (200, 1000):
                r = power_run("doc_updates", size, args.trials, detector, args.seed + 2, "stale index (24 h)",
                              args.histories, not args.no_by_query)
                powers.append({"scenario": "stale index (24 h)", "shape": "doc_updates", "size": size, **r})
                ptable.add_row("stale index (24 h)", "doc_updates", f"{size:,}",
                               f"{r['rate']:.0%} ({r['low']:.0%}–{r['high']:.0%})", f"{r['by_check']:.0%}")
        console.print(ptable)
        out["power"] = powers
    console.print(f"{time.perf_counter() - started:.0f} s")
    if args.json:
        args.json.write_text(json.dumps(out, indent=1, default=str) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
