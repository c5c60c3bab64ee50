"""Shadow comparison over many pairs: how long `ragmon shadow compare` takes when the work runs in ClickHouse.

    python3 bench/shadow.py                      # 100,000 pairs (200,000 traces), 10% judged
    python3 bench/shadow.py --pairs 1000000      # the 1 million pairs of the issue

The traffic is generated inside ClickHouse with numbers() (Python would take minutes to build a million
traces): production and shadow traces share query_ids, four strata, 10 ranked chunk ids per list with a
partial overlap, log-normal-ish latencies, 1% candidate errors, and one judge metric on a fraction of the
pairs with one fingerprint. The comparison then runs end to end — pairing, per-pair agreement, per-stratum
aggregates with exact quantiles, score sample for KS/Wasserstein, judged pairs + bootstrap, and the
disagreement examples — and each stage is timed: wall time and the process's CPU time (chDB runs in-process,
so CPU time covers its threads and is steadier than wall time on a shared machine). Uses its own embedded
chDB directory (a temporary one unless --dir is given); the best of --rounds runs is reported.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pydantic import SecretStr  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from ragmon.config import StoreSettings  # noqa: E402
from ragmon.shadow import pairs, quality, queries  # noqa: E402
from ragmon.shadow.compare import CompareOptions, compare  # noqa: E402
from ragmon.shadow.pairs import RetrieverRef  # noqa: E402
from ragmon.store import ClickHouseStore  # noqa: E402

GENERATE = """
INSERT INTO {traces} (trace_id, query_id, ts, retriever_name, retriever_version, variant, question, category,
                      retrieved_chunk_ids, retrieved_scores, retrieved_ranks, context_tokens, latency_ms,
                      latency_total_ms, cost_usd, error, ingested_at)
SELECT
    concat(side, '-', toString(number)) AS trace_id,
    concat('q-', toString(number)) AS query_id,
    now64(3) - toIntervalMillisecond(number % 80000000) AS ts,
    if(side = 'p', 'hybrid', 'dense') AS retriever_name,
    if(side = 'p', 'v1', 'v2') AS retriever_version,
    if(side = 'p', 'production', 'shadow') AS variant,
    concat('question number ', toString(number)) AS question,
    ['billing', 'consent', 'shipping', 'returns'][number % 4 + 1] AS category,
    if(err, [], arrayMap(i -> concat('c', toString(if(side = 'p' OR cityHash64(number, i) % 3 != 0,
        (number + i * 7) % 500, cityHash64(number, i, 'x') % 500))), range(10))) AS retrieved_chunk_ids,
    if(err, [], arrayMap(i -> 0.9 - i * 0.05 + (cityHash64(number, i, side) % 100) / 5000 + if(side = 'p', 0, 0.03),
        range(10))) AS retrieved_scores,
    if(err, [], arrayMap(i -> toUInt32(i + 1), range(10))) AS retrieved_ranks,
    toUInt32(300 + cityHash64(number, side) % 300) AS context_tokens,
    map('retrieve', lat) AS latency_ms, lat AS latency_total_ms,
    0.0004 + (cityHash64(number, side, 'c') % 100) / 1000000 AS cost_usd,
    if(err, 'timeout', '') AS error,
    now64(3) AS ingested_at
FROM (
    SELECT number, side, side = 's' AND cityHash64(number, 'e') % 100 = 0 AS err,
           exp(log(40) + ((cityHash64(number, side, 'l') % 1000) / 1000.0 - 0.5) * 0.8)
             * if(side = 's', 1.2, 1.0) AS lat
    FROM numbers({{n:UInt64}}) ARRAY JOIN ['p', 's'] AS side
)
"""

SCORES = """
INSERT INTO {scores} (trace_id, query_id, ts, scored_at, retriever_name, retriever_version, variant, category,
                      metric, value, status, judge_name, judge_fingerprint)
SELECT trace_id, query_id, ts, now64(3), retriever_name, retriever_version, variant, category, 'faithfulness',
       least(1.0, greatest(0.0, 0.8 + ((cityHash64(trace_id) % 1000) / 1000.0 - 0.5) * 0.4
           - if(variant = 'shadow' AND category = 'billing', 0.05, 0))),
       'ok', 'bench-judge', 'fp-bench'
FROM {traces}
WHERE cityHash64(query_id) % 1000 < {{permille:UInt32}}
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pairs", type=int, default=100_000, help="paired queries to generate (default 100,000)")
    ap.add_argument("--judged", type=float, default=0.10, help="fraction of pairs with judge scores (default 0.1)")
    ap.add_argument("--rounds", type=int, default=2, help="comparison runs; the best is reported (default 2)")
    ap.add_argument("--dir", type=Path, default=None, help="chDB data directory (default: a temporary one)")
    args = ap.parse_args()
    console = Console()
    tmp = tempfile.TemporaryDirectory(prefix="ragmon-bench-shadow-") if args.dir is None else None
    path = args.dir or Path(tmp.name)  # type: ignore[union-attr]
    store = ClickHouseStore.open(StoreSettings(dsn=SecretStr(f"chdb://{path}"), database="bench_shadow"))
    store.command(f"TRUNCATE TABLE {store.table('traces')}")
    store.command(f"TRUNCATE TABLE {store.table('scores')}")

    t0 = time.perf_counter()
    store.command(GENERATE.format(traces=store.table("traces")), {"n": args.pairs})
    store.command(SCORES.format(scores=store.table("scores"), traces=store.table("traces")),
                  {"permille": int(round(args.judged * 1000))})
    store.command(f"OPTIMIZE TABLE {store.table('traces')} FINAL")
    generate_s = time.perf_counter() - t0
    n_traces = int(store.command(f"SELECT count() FROM {store.table('traces')}"))
    n_scores = int(store.command(f"SELECT count() FROM {store.table('scores')}"))

    now = datetime.now(UTC)
    base, cand = RetrieverRef("hybrid", "v1", "production"), RetrieverRef("dense", "v2", "shadow")
    opts = CompareOptions(base, cand, now - timedelta(days=2), now + timedelta(minutes=1), k=10, n_resamples=1000)
    params = pairs.parameters(base, cand, opts.since, opts.until, k=10)
    stages = {
        "pair + agree + aggregate (summary SQL)": lambda: queries.summary(store, params, seed=0, lowest=5),
        "judged pairs (SQL + Python pairing)": lambda: quality.pair_scores(queries.judged_scores(store, params)),
        "full compare() (all stages + bootstrap)": lambda: compare(store, opts),
    }
    timings: dict[str, tuple[float, float]] = {}
    result = None
    for name, fn in stages.items():
        best = (float("inf"), float("inf"))
        for _ in range(max(1, args.rounds)):
            t, c = time.perf_counter(), time.process_time()
            out = fn()
            best = min(best, (time.perf_counter() - t, time.process_time() - c))
        timings[name] = best
        result = out

    table = Table(title=f"shadow compare over {args.pairs:,} pairs "
                        f"({platform.machine()}, {os.cpu_count()} cores, chDB, best of {args.rounds})")
    table.add_column("stage")
    table.add_column("wall s", justify="right")
    table.add_column("CPU s (all threads)", justify="right")
    table.add_column("pairs/s (wall)", justify="right")
    table.add_row("generate traffic in ClickHouse (not part of compare)", f"{generate_s:.2f}", "", "")
    for name, (wall, cpu) in timings.items():
        table.add_row(name, f"{wall:.2f}", f"{cpu:.2f}", f"{args.pairs / wall:,.0f}")
    console.print(table)
    import resource

    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    console.print(f"peak resident memory of the process (chDB included): {peak_mb:,.0f} MB")
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    console.print(f"load average during the run: {load:.1f} on {os.cpu_count()} cores")
    billing = next(q.result.mean_difference
                   for s in result.strata if s.stratum == "billing" for q in s.quality)  # type: ignore[union-attr]
    console.print(f"{n_traces:,} traces, {n_scores:,} score rows; result: {result.pairs:,} pairs, "  # type: ignore[union-attr]
                  f"overlap@10 {result.overall.agreement.mean_overlap:.3f}, "  # type: ignore[union-attr]
                  f"faithfulness Δ billing "
                  f"{billing:+.3f}, "
                  f"verdict {result.verdict.decision}")  # type: ignore[union-attr]
    if tmp is not None:
        tmp.cleanup()


if __name__ == "__main__":
    main()
