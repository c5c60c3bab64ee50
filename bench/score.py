"""Live-scoring throughput: the heuristic judge, the full score pipeline into chDB, and the sampler's cost.

    python3 bench/score.py                          # 2,000 traces, 5 context chunks of ~400 characters
    python3 bench/score.py --traces 5000 --chunks 10 --chunk-chars 1000 --oracle     # unique chunks, old vs new
    python3 bench/score.py --traces 5000 --chunks 10 --chunk-chars 1000 --zipf 1.1   # popular chunks repeat

Every chunk is new text unless ``--zipf S``: then each trace's chunks are drawn from ``--distinct-chunks`` texts,
the k-th most popular with probability proportional to 1/k^S (production traffic retrieves the same popular
chunks again and again, which the heuristic judge's chunk cache is for). The garbage collector is tuned as the
daemon tunes it (``ragmon.daemon.tune_gc``) unless ``--no-gc-tuning``.

Reported (best of --repeat, wall clock; the judge also in this thread's CPU time, per core):
* judge+metrics: traces/s of ``score_trace(HeuristicJudge(), trace)`` — judging plus the metrics library (with
  ``--oracle``, also the judge as it was before the chunk cache, ``tests/support/heuristic_oracle.py``, timed
  in turns with the new one on the same traces, and its verdicts compared);
* pipeline: traces/s of ``LiveScorer.process`` at rate 1 (decide, judge, metrics, two columnar inserts into a
  fresh embedded chDB store, batches of --batch);
* sampler: µs per decision on the ingest path — ``decide`` at rate 0.05 without guards (a hash), and with an
  hourly cap and a daily budget (adds a lock and the clock).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.timing import best_of  # noqa: E402
from ragmon.contracts.decode import decode_trace  # noqa: E402
from ragmon.judge import HeuristicJudge  # noqa: E402
from ragmon.judge.scoring import score_trace  # noqa: E402
from ragmon.sampling.sampler import ScoreSampler  # noqa: E402

WORDS = ("consent withdrawal marketing message customer policy account refund billing invoice period notice "
         "contract renewal data privacy request access deletion processing retention days month fee charge "
         "support agent email phone address plan upgrade cancel term").split()


def make_traces(n: int, chunks: int, chunk_chars: int, seed: int, zipf: float | None = None,
                distinct: int = 10_000) -> list:
    rng = random.Random(seed)

    def text(chars: int) -> str:
        out, size = [], 0
        while size < chars:
            sentence = " ".join(rng.choice(WORDS) for _ in range(rng.randint(6, 14))).capitalize() + "."
            out.append(sentence)
            size += len(sentence) + 1
        return " ".join(out)

    pool: list[str] = []
    cumulative: list[float] = []
    if zipf is not None:
        pool = [text(chunk_chars) for _ in range(distinct)]
        total = 0.0
        for k in range(1, distinct + 1):
            total += 1 / k**zipf
            cumulative.append(total)

    def pick(i: int) -> list[tuple[str, str]]:
        if zipf is None:
            return [(f"c{i}-{j}", text(chunk_chars)) for j in range(chunks)]
        chosen: dict[int, None] = {}
        while len(chosen) < min(chunks, distinct):
            chosen[rng.choices(range(distinct), cum_weights=cumulative)[0]] = None
        return [(f"k{k}", pool[k]) for k in chosen]

    traces = []
    for i in range(n):
        picked = pick(i)
        texts = [t for _, t in picked]
        sentences = [s + "." for t in texts for s in t.split(". ") if s][: rng.randint(2, 5)]
        answer = " ".join(s if rng.random() < 0.7 else text(60) for s in sentences)
        doc = {
            "trace_id": f"t{i}", "query_id": f"q{i}", "timestamp": "2026-12-01T12:00:00Z",
            "retriever": {"name": "hybrid", "version": "v1"}, "question": text(60), "category": f"c{i % 5}",
            "retrieved": [{"chunk_id": cid, "doc_id": f"d{j}", "score": 1 - j / 10, "rank": j + 1,
                           "text": t} for j, (cid, t) in enumerate(picked)],
            "context": {"chunk_ids": [cid for cid, _ in picked]},
            "answer": answer,
            "citations": [{"sentence": 0, "chunk_id": picked[0][0], "quote": texts[0][:40]}],
        }
        traces.append(decode_trace(json.dumps(doc).encode()).trace)
    return traces


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--traces", type=int, default=2000, help="traces per run")
    parser.add_argument("--chunks", type=int, default=5, help="context chunks per trace")
    parser.add_argument("--chunk-chars", type=int, default=400, help="characters per chunk")
    parser.add_argument("--batch", type=int, default=500, help="traces per LiveScorer batch (one insert per table)")
    parser.add_argument("--decisions", type=int, default=200_000, help="sampler decisions to time")
    parser.add_argument("--repeat", type=int, default=3, help="runs per figure; the best is reported")
    parser.add_argument("--zipf", type=float, default=None, help="draw chunks from a pool with this Zipf exponent")
    parser.add_argument("--distinct-chunks", type=int, default=10_000, help="pool size with --zipf")
    parser.add_argument("--oracle", action="store_true", help="also time the old heuristic judge, in turns")
    parser.add_argument("--no-gc-tuning", action="store_true", help="keep Python's default garbage collector")
    args = parser.parse_args()

    traces = make_traces(args.traces, args.chunks, args.chunk_chars, seed=7, zipf=args.zipf,
                         distinct=args.distinct_chunks)
    if not args.no_gc_tuning:
        from ragmon.daemon import tune_gc

        tune_gc()
    judge = HeuristicJudge()
    chunks = (f"chunks drawn from {args.distinct_chunks:,} by Zipf popularity (s={args.zipf:g})" if args.zipf
              else "every chunk unique")
    print(f"machine: {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}, {platform.machine()}, "
          f"{platform.python_implementation()} {platform.python_version()}; {args.traces:,} traces, {args.chunks} "
          f"chunks x ~{args.chunk_chars} chars, {chunks}; gc {'default' if args.no_gc_tuning else 'tuned'}")

    if args.oracle:
        from tests.support.heuristic_oracle import OracleHeuristicJudge

        old = OracleHeuristicJudge()
        assert all(judge.judge(t) == old.judge(t) for t in traces[:500]), "verdicts differ from the old judge"
    best = {"old": float("inf"), "new": float("inf")}
    cpu = {"old": float("inf"), "new": float("inf")}
    fresh = judge
    for _ in range(args.repeat):  # in turns, so both see the same machine load; each run starts a cold cache
        fresh = HeuristicJudge()
        runs = (("old", old), ("new", fresh)) if args.oracle else (("new", fresh),)
        for name, j in runs:
            # this thread's CPU time as well as the wall clock: on a shared machine the wall clock counts the
            # time other processes held the core, the CPU time is what one core spends per trace
            started = time.thread_time()
            best[name] = min(best[name], best_of(1, lambda j=j: [score_trace(j, tr) for tr in traces]))
            cpu[name] = min(cpu[name], time.thread_time() - started)
    labels = (("old", "old heuristic (oracle)"), ("new", "heuristic judge + metrics"))
    for name, label in labels if args.oracle else labels[1:]:
        t, c = best[name], cpu[name]
        print(f"{label + ':':<28} {args.traces / t:>10,.0f} traces/s  ({t / args.traces * 1e6:,.0f} µs/trace); "
              f"CPU {c / args.traces * 1e6:,.0f} µs/trace = {args.traces / c:,.0f} traces/s per core")
    if args.oracle:
        print(f"{'speed-up:':<28} {best['old'] / best['new']:>10.2f} x  (same verdicts on the first 500 traces)")
    hits, misses, _ = fresh.profiles.stats()
    print(f"{'chunk cache:':<28} {hits / max(1, hits + misses):>10.1%} hits ({judge.profiles.max_entries:,} entries)")

    from pydantic import SecretStr

    from ragmon.config import StoreSettings
    from ragmon.score.pipeline import LiveScorer
    from ragmon.store import ClickHouseStore

    store = ClickHouseStore.open(StoreSettings(dsn=SecretStr(f"chdb://{tempfile.mkdtemp(prefix='ragmon-bench-')}")))
    scorer = LiveScorer(store, judge, ScoreSampler(salt="bench", rate=1.0))

    def pipeline() -> None:
        for i in range(0, len(traces), args.batch):
            scorer.process(traces[i:i + args.batch], batch_key=f"bench-{time.perf_counter_ns()}-{i}")

    t = best_of(args.repeat, pipeline)
    print(f"pipeline into chDB (rate 1): {args.traces / t:>10,.0f} traces/s  (batches of {args.batch}, 9 score rows "
          "+ 1 decision row per trace)")

    ids = [f"query-{i}" for i in range(args.decisions)]
    plain = ScoreSampler(salt="bench", rate=0.05)
    guarded = ScoreSampler(salt="bench", rate=0.05, max_per_hour=10**9, daily_budget_usd=10**9)
    for name, sampler in (("sampler decide (rate only)", plain), ("sampler decide (cap+budget)", guarded)):
        t = best_of(args.repeat, lambda s=sampler: [s.decide(q, "hybrid", "billing") for q in ids])
        print(f"{name + ':':<28} {t / len(ids) * 1e6:>10.2f} µs/trace ({len(ids) / t:,.0f} decisions/s)")


if __name__ == "__main__":
    main()
