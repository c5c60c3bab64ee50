"""Metric throughput: ragmon.metrics against trec_eval (pytrec-eval-terrier), same data, same run.

    python3 bench/metrics.py                      # 1,000 queries, k=100, 5 repeats
    python3 bench/metrics.py --queries 10000 --k 20

Each query has a ranking of --k chunk ids drawn from a pool of 1,000 and 1–30 judged chunks graded 0–3. Both
sides compute recall@k, P@k, success (hit)@k, reciprocal rank and nDCG@k for every query; the script checks
they agree before it prints a figure. Reported: queries per second, best of --repeat runs (wall clock).
trec_eval is timed twice: evaluate() alone on a prepared evaluator, and including building the evaluator
from the qrels (which is what a one-off gate run pays).
"""

from __future__ import annotations

import argparse
import platform
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pytrec_eval  # noqa: E402

from bench.timing import best_of  # noqa: E402
from ragmon.metrics import hit_at_k, ndcg_at_k, precision_at_k, recall_at_k, reciprocal_rank  # noqa: E402


def make_data(n: int, k: int, seed: int) -> tuple[list[list[str]], list[dict[str, int]]]:
    rng = random.Random(seed)
    pool = [f"doc-{i:05d}" for i in range(1000)]
    rankings, judgments = [], []
    for _ in range(n):
        rankings.append(rng.sample(pool, k))
        judged = rng.sample(pool, rng.randint(1, 30))
        grades = {d: rng.randint(0, 3) for d in judged}
        grades[judged[0]] = max(grades[judged[0]], 1)
        judgments.append(grades)
    return rankings, judgments


def ours(rankings: list[list[str]], judgments: list[dict[str, int]], k: int) -> list[tuple[float, ...]]:
    out = []
    for ranked, grades in zip(rankings, judgments, strict=True):
        relevant = {d for d, g in grades.items() if g >= 1}
        out.append((recall_at_k(ranked, relevant, k), precision_at_k(ranked, relevant, k),
                    hit_at_k(ranked, relevant, k),
                    reciprocal_rank(ranked, relevant), ndcg_at_k(ranked, grades, k)))  # fmt: skip
    return out  # type: ignore[return-value]


def reference_inputs(rankings: list[list[str]], judgments: list[dict[str, int]]) -> tuple[dict, dict]:
    qrels = {f"q{i}": g for i, g in enumerate(judgments)}
    run = {f"q{i}": {d: float(len(r) - j) for j, d in enumerate(r)} for i, r in enumerate(rankings)}
    return qrels, run


def measures(k: int) -> set[str]:
    return {f"recall.{k}", f"P.{k}", f"success.{k}", "recip_rank", f"ndcg_cut.{k}"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--queries", type=int, default=1000, help="number of queries (default 1000)")
    parser.add_argument("--k", type=int, default=100, help="ranking length and cut-off (default 100)")
    parser.add_argument("--repeat", type=int, default=5, help="timed repetitions; the best is reported (default 5)")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()

    rankings, judgments = make_data(args.queries, args.k, args.seed)
    qrels, run = reference_inputs(rankings, judgments)
    evaluator = pytrec_eval.RelevanceEvaluator(qrels, measures(args.k))

    # agreement first: a fast wrong answer is not a result
    mine = ours(rankings, judgments, args.k)
    ref = evaluator.evaluate(run)
    names = (f"recall_{args.k}", f"P_{args.k}", f"success_{args.k}", "recip_rank", f"ndcg_cut_{args.k}")
    worst = max(abs(m[j] - ref[f"q{i}"][names[j]]) for i, m in enumerate(mine) for j in range(5))
    if worst > 1e-9:
        raise SystemExit(f"disagreement with trec_eval: max |difference| = {worst}")

    t_ours = best_of(args.repeat, lambda: ours(rankings, judgments, args.k))
    t_eval = best_of(args.repeat, lambda: evaluator.evaluate(run))
    t_full = best_of(args.repeat, lambda: pytrec_eval.RelevanceEvaluator(qrels, measures(args.k)).evaluate(run))
    n = args.queries
    print(f"metric throughput: {n} queries, k={args.k}, 5 measures per query (recall, P, hit, RR, nDCG), "
          f"best of {args.repeat}; Python {platform.python_version()} on {platform.machine()}")  # fmt: skip
    print(f"  agreement with trec_eval: max |difference| = {worst:.1e}")
    print(f"  {'implementation':<44} {'queries/s':>12} {'ms total':>10}")
    for label, seconds in (("ragmon.metrics (pure Python)", t_ours),
                           ("trec_eval via pytrec_eval: evaluate()", t_eval),
                           ("trec_eval via pytrec_eval: build + evaluate()", t_full)):  # fmt: skip
        print(f"  {label:<44} {n / seconds:>12,.0f} {seconds * 1000:>10.1f}")


if __name__ == "__main__":
    main()
