"""One drift check over N traces on embedded ClickHouse: the pushed-down aggregation beside the naive way.

    python -m bench.drift                 # 10 million traces (about 1.5 GB of chDB data; a few minutes)
    python -m bench.drift --n 1000000     # smaller
    python -m bench.drift --dir /tmp/big  # keep the store: a second run with the same --dir and --n skips the
                                          # generation and checks at the same (stored) generation time
    python -m bench.drift --results r.json  # every result of the timed check as JSON (compare two versions)

The traces are generated inside ClickHouse (``INSERT … SELECT … FROM numbers(n)``): 6 groups (2 retrievers × 3
strata), 90 % of the traffic spread over every hour of the 8 days before the current one (the trailing
week's 168 reference windows and the CUSUM's 24 before them; until 2026-12-04 only the same hour of each of the
previous 7 days, which left 185 of the 193 windows empty), 10 % in the last hour, with a +0.02 score shift
(0.25 σ) in one retriever; questions Zipf-popular among ``--questions``. Then, in the same run:

* **pushed down** — ``DriftChecker.run_once()``: ClickHouse returns counts, means and t-digest sketches per
  group and hourly window (the current one, 168 reference windows, 24 more for the CUSUM); Python runs the
  window tests on a few hundred numbers per window; results are stored and exported;
* **naive** — every row of the same windows into numpy (``query_np``), summarised per group and window in Python
  with exact quantiles, then the same assessment.

It prints both times, the rows each moved, and how far the window z-scores from sketches are from exact ones.
"""

from __future__ import annotations

import argparse
import json
import math
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
from pydantic import SecretStr
from rich.console import Console
from rich.table import Table

from ragmon.config import DriftSettings, StoreSettings
from ragmon.drift.check.check import DriftChecker
from ragmon.drift.check.window_queries import plan_parameters  # the same windows as the check
from ragmon.drift.method.assess import Detector, Entry, Planned, assess
from ragmon.drift.method.features import plan_features
from ragmon.drift.method.series import Series
from ragmon.drift.method.summary import ContinuousSummary, RateSummary
from ragmon.drift.method.windows import plan
from ragmon.drift.simulation.synthetic import SyntheticSpec, insert_synthetic
from ragmon.errors import StoreError
from ragmon.store import ClickHouseStore
from ragmon.store.client import open_client
from ragmon.telemetry import Telemetry

CONTINUOUS = ("top1_score", "mean_score", "top2_gap", "n_results", "latency_ms", "cost_usd")
RATES = ("empty_shortlist_rate", "refusal_rate")
MARKER = "bench-drift.json"  # in --dir: the n, questions and generation time of the store it holds


def generate(store: ClickHouseStore, n: int, now: datetime, console: Console, questions: int) -> float:
    started = time.perf_counter()
    cur_start = now - timedelta(hours=1)
    # every hour of the 8 days before the current one (the reference week and the CUSUM's day before it)
    per_day = int(n * 0.9) // 8
    specs = [SyntheticSpec(per_day, cur_start - timedelta(days=d + 1), cur_start - timedelta(days=d), seed=d + 1,
                           retrievers=("hybrid@v1", "dense@v2"), questions=questions) for d in range(8)]
    current = n - per_day * 8
    specs.append(SyntheticSpec(current // 2, cur_start, now, seed=100, retrievers=("hybrid@v1",), run_id="cur",
                               questions=questions))
    specs.append(SyntheticSpec(current - current // 2, cur_start, now, seed=101, retrievers=("dense@v2",),
                               shift=0.02, run_id="cur", questions=questions))
    for spec in specs:
        insert_synthetic(store, spec)  # in slices of bounded memory
    store.command(f"OPTIMIZE TABLE {store.table('traces')} FINAL")
    took = time.perf_counter() - started
    console.print(f"generated {n:,} traces inside ClickHouse in {took:.1f}s")
    return took


def naive(store: ClickHouseStore, settings: StoreSettings, now: datetime) -> tuple[float, int, dict]:
    """Every row of the check's windows into numpy, summarised per group and window in Python (exact quantiles),
    then the same assessment as the pushed-down check."""
    client = open_client(settings)
    wp = plan(DriftSettings().windows, now, lookback=DriftSettings().sequential.lookback_windows)
    params = plan_parameters(wp)
    started = time.perf_counter()
    sql = (f"SELECT cityHash64(retriever_name, retriever_version, variant, category) AS g, "
           f"intDiv({{end:Int64}} - 1 - toUnixTimestamp64Milli(ts), {{win:Int64}}) AS w, top1_score, mean_score, "
           f"top2_gap, toFloat64(n_results) AS n_results, latency_total_ms AS latency_ms, cost_usd, "
           f"toUInt8(n_results = 0) AS empty_shortlist_rate, toUInt8(behaviour = 'refuse') AS refusal_rate "
           f"FROM {store.table('traces')} WHERE ts >= fromUnixTimestamp64Milli({{lo:Int64}}, 'UTC') "
           f"AND ts < fromUnixTimestamp64Milli({{hi:Int64}}, 'UTC')")
    data = client.query_np(sql, parameters=params)
    fetched = time.perf_counter() - started
    rows = len(data)
    plans = {p.feature.name: [Planned(t.test, t.threshold, t.effect_threshold, t.min_samples) for t in p.tests]
             for p in plan_features(DriftSettings(features=[*CONTINUOUS, *RATES]))}
    entries = []
    for g in np.unique(data["g"]):
        in_g = data[data["g"] == g]
        for name in (*CONTINUOUS, *RATES):
            summaries = []
            for w in range(wp.history):
                values = in_g[name][in_g["w"] == w]
                summaries.append(RateSummary.from_samples(values.astype(bool)) if name in RATES
                                 else ContinuousSummary.from_samples(values.astype(float)))
            entries.append(Entry((int(g), name), plans[name], Series.from_summaries(summaries)))
    exact = {(*a.key, a.planned.test.name): a.decision.outcome.statistic for a in assess(entries, Detector())
             if a.decision.outcome is not None}
    took = time.perf_counter() - started
    Console().print(f"  naive: fetched {rows:,} rows in {fetched:.1f}s, summaries and tests in Python "
                    f"{took - fetched:.1f}s")
    return took, rows, exact


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=10_000_000, help="traces to generate (default 10,000,000)")
    parser.add_argument("--questions", type=int, default=1_000_000,
                        help="distinct questions, Zipf-popular, each with its own score level (default 1,000,000; "
                             "0: every trace its own level)")
    parser.add_argument("--dir", type=Path, default=None, help="chDB data directory (default: a temporary one)")
    parser.add_argument("--results", type=Path, default=None,
                        help="write every result of the timed check here as JSON (verdicts, statistics, summaries)")
    parser.add_argument("--repeat", type=int, default=1, help="timed checks (default 1; the time of each is printed)")
    parser.add_argument("--skip-naive", action="store_true", help="only time the pushed-down check")
    parser.add_argument("--memory-mb", type=int, default=StoreSettings().embedded_memory_mb,
                        help="store.embedded_memory_mb of the engine (default: ragmon's). The naive way fetches "
                             "every row; at 10M it needs more than the default 1024: --memory-mb 4096")
    args = parser.parse_args()
    if args.n < 1000:
        parser.error("--n must be at least 1000")
    console = Console()
    tmp = None if args.dir else tempfile.TemporaryDirectory(prefix="ragmon-bench-drift-")
    directory = args.dir or Path(tmp.name)  # type: ignore[union-attr]
    settings = StoreSettings(dsn=SecretStr(f"chdb://{directory}"), database="bench_drift",
                             embedded_memory_mb=args.memory_mb)
    store = ClickHouseStore.open(settings)
    marker = directory / MARKER
    made = json.loads(marker.read_text()) if marker.exists() else {}
    if made.get("n") == args.n and made.get("questions") == args.questions:
        now = datetime.fromisoformat(made["now"])
        console.print(f"reusing the store in {directory} ({args.n:,} traces generated at {now:%Y-%m-%d %H:%M} UTC)")
    else:
        marker.unlink(missing_ok=True)
        store.command(f"TRUNCATE TABLE IF EXISTS {store.table('traces')}")
        now = datetime.now(UTC).replace(microsecond=0)
        generate(store, args.n, now, console, args.questions)
        if args.dir:
            marker.write_text(json.dumps({"n": args.n, "questions": args.questions, "now": now.isoformat()}))

    features = [*CONTINUOUS, *RATES]
    checker = DriftChecker(store, DriftSettings(features=features), Telemetry(), clock=lambda: now)
    checker.run_once()  # warm-up: first-query compilation and page cache, like any long-running daemon
    times = []
    for _ in range(max(1, args.repeat)):
        started = time.perf_counter()
        result = checker.run_once()
        times.append(time.perf_counter() - started)
    pushed = min(times)
    if len(times) > 1:
        console.print(f"timed checks: {', '.join(f'{t:.2f}s' for t in times)} (the table shows the fastest)")
    if args.results:
        args.results.write_text(json.dumps(results_json(result), indent=1, sort_keys=True))
    # the default check also has newest_version_share (chunk level: an ARRAY JOIN over every retrieved chunk)
    full = DriftChecker(store, DriftSettings(features=[*features, "newest_version_share"]), Telemetry(),
                        clock=lambda: now)
    started = time.perf_counter()
    full.run_once()
    pushed_full = time.perf_counter() - started
    scanned = store.query_rows(f"SELECT count() AS n FROM {store.table('traces')}")[0]["n"]

    table = Table(title=f"one drift check over {args.n:,} traces (chDB, {len(features)} features, "
                        f"{len({r.group for r in result.results})} groups)")
    table.add_column("approach")
    table.add_column("seconds", justify="right")
    table.add_column("rows to Python", justify="right")
    windows = plan(DriftSettings().windows, now).history
    summaries = windows * len({(r.group, r.feature) for r in result.results})
    table.add_row("pushed down (ClickHouse sketches per window + ragmon tests, stored, exported)", f"{pushed:.2f}",
                  f"≤ {summaries:,} window summaries")
    table.add_row("pushed down, + newest_version_share (chunk-level lookup)", f"{pushed_full:.2f}",
                  f"≤ {summaries + windows * len({r.group for r in result.results}):,} window summaries")
    if not args.skip_naive:
        try:
            took, rows, exact = naive(store, settings, now)
        except StoreError as exc:
            if "MEMORY_LIMIT_EXCEEDED" not in str(exc):
                raise
            console.print(f"naive: every row does not fit in the engine's {args.memory_mb} MiB: rerun with a larger "
                          "--memory-mb (4096 at 10M traces) or --skip-naive", style="yellow")
            args.skip_naive = True
        else:
            table.add_row("naive (all rows → numpy, summaries and tests in Python), same 8 features", f"{took:.2f}",
                          f"{rows:,}")
    console.print(table)
    drifted = sorted({f"{r.group.retriever}/{r.group.stratum}/{r.feature}/{r.test}" for r in result.drifted})
    console.print(f"traces stored: {scanned:,}; drifted tests: {', '.join(drifted) or 'none'}")
    if not args.skip_naive:
        for test in ("window_mean", "window_quantiles"):
            diffs = []
            for r in result.results:
                key = (_hash(store, r.group), r.feature, r.test)
                if r.test == test and key in exact and np.isfinite(r.statistic) and np.isfinite(exact[key]):
                    diffs.append(abs(r.statistic - exact[key]))
            if diffs:
                console.print(f"{test} z from ClickHouse's sketches vs from every row in numpy: max |Δz| = "
                              f"{max(diffs):.4f}, mean {np.mean(diffs):.4f} over {len(diffs)} group×feature pairs")
    if tmp is not None:
        tmp.cleanup()


def results_json(result) -> list[dict]:
    """Every result of a check as plain JSON, sorted, without the check's id and time: two versions of the checker
    run on the same store must write the same file."""
    def plain(v):
        if isinstance(v, float):
            return None if math.isnan(v) else ("inf" if math.isinf(v) else v)
        if isinstance(v, dict):
            return {str(k): plain(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return [plain(x) for x in v]
        if hasattr(v, "__dataclass_fields__"):
            return {k: plain(getattr(v, k)) for k in v.__dataclass_fields__}
        if isinstance(v, (int, str, bool)) or v is None:
            return v
        return repr(v)
    rows = []
    for r in result.results:
        row = {k: plain(getattr(r, k)) for k in r.__dataclass_fields__ if k not in ("check_id", "checked_at")}
        rows.append(row)
    return sorted(rows, key=lambda x: json.dumps([x["group"], x["feature"], x["test"]], sort_keys=True))


def _hash(store: ClickHouseStore, group) -> int:
    rows = store.query_rows("SELECT cityHash64({a:String}, {b:String}, {c:String}, {d:String}) AS h",
                            {"a": group.retriever_name, "b": group.retriever_version, "c": group.variant,
                             "d": group.stratum})
    return int(rows[0]["h"])


if __name__ == "__main__":
    main()
