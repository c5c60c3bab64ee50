"""Live-scoring throughput: the heuristic judge, the full score pipeline into chDB, and the sampler's cost.

    python3 bench/score.py                          # 2,000 traces, 5 context chunks of ~400 characters
    python3 bench/score.py --traces 20000 --chunks 10 --chunk-chars 1000

Reported (best of --repeat, wall clock):
* judge+metrics: traces/s of ``score_trace(HeuristicJudge(), trace)`` — judging plus the metrics library;
* pipeline: traces/s of ``LiveScorer.process`` at rate 1 (decide, judge, metrics, two columnar inserts into a
  fresh embedded chDB store, batches of --batch);
* sampler: µs per decision on the ingest path — ``decide`` at rate 0.05 without guards (a hash), and with an
  hourly cap and a daily budget (adds a lock and the clock).
"""

from __future__ import annotations

import argparse
import json
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


def make_traces(n: int, chunks: int, chunk_chars: int, seed: int) -> list:
    rng = random.Random(seed)

    def text(chars: int) -> str:
        out, size = [], 0
        while size < chars:
            sentence = " ".join(rng.choice(WORDS) for _ in range(rng.randint(6, 14))).capitalize() + "."
            out.append(sentence)
            size += len(sentence) + 1
        return " ".join(out)

    traces = []
    for i in range(n):
        texts = [text(chunk_chars) for _ in range(chunks)]
        sentences = [s + "." for t in texts for s in t.split(". ") if s][: rng.randint(2, 5)]
        answer = " ".join(s if rng.random() < 0.7 else text(60) for s in sentences)
        doc = {
            "trace_id": f"t{i}", "query_id": f"q{i}", "timestamp": "2026-12-01T12:00:00Z",
            "retriever": {"name": "hybrid", "version": "v1"}, "question": text(60), "category": f"c{i % 5}",
            "retrieved": [{"chunk_id": f"c{i}-{j}", "doc_id": f"d{j}", "score": 1 - j / 10, "rank": j + 1,
                           "text": t} for j, t in enumerate(texts)],
            "context": {"chunk_ids": [f"c{i}-{j}" for j in range(chunks)]},
            "answer": answer,
            "citations": [{"sentence": 0, "chunk_id": f"c{i}-0", "quote": texts[0][:40]}],
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
    args = parser.parse_args()

    traces = make_traces(args.traces, args.chunks, args.chunk_chars, seed=7)
    judge = HeuristicJudge()
    print(f"machine: {platform.machine()}, {platform.python_implementation()} {platform.python_version()}; "
          f"{args.traces:,} traces, {args.chunks} chunks x ~{args.chunk_chars} chars")

    t = best_of(args.repeat, lambda: [score_trace(judge, tr) for tr in traces])
    print(f"heuristic judge + metrics:   {args.traces / t:>10,.0f} traces/s  ({t / args.traces * 1e6:,.0f} µs/trace)")

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
