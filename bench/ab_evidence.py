"""How much evidence `ragmon ab compare` needs before a measure can say "ok": two identical arms, simulated.

    python3 bench/ab_evidence.py                  # every measure at its default tolerance, 400 runs per size
    python3 bench/ab_evidence.py --runs 1000

A measure is "ok" only when its interval rules out harm beyond the tolerance (docs/ab.md), so with two arms that
do not differ at all "ok" is still a matter of sample size: the interval must shrink inside the tolerance. For
each measure this draws two identical arms of n values (the same distribution on both sides) ``--runs`` times
per n, judges each draw with the real code (``ragmon.ab.stats`` and ``ragmon.ab.compare.judge``) and prints the
smallest n per arm (on a grid 12 % apart) at which "ok" came out in at least half and in at least 80 % of the
draws. The distributions:

* feedback: values of 1 or -1, 70 % thumbs-up (variance 0.84), at the feedback tolerance (``ab.max_feedback_drop``)
  and at 0.02, the quality tolerance it shared before;
* the outcome rates at base rates 5 %, 10 %, 30 % and 50 % (Newcombe's interval), at ``ab.max_rate_harm``;
* total latency: log-normal with a median of 1.2 s and a mean of about 1.5 s (sd ≈ 1 s), at
  ``ab.max_latency_increase_ms``;
* a judged quality mean (faithfulness-like: a Beta(8, 2) value in 0..1, sd ≈ 0.12), at ``ab.max_quality_drop``.

For feedback, n counts feedback events (usually a few per hundred queries); for the rates and latency, traces;
for quality, judged traces (``sampling.rate`` of the cohort). Seeded: the same figures on every run.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from ragmon.ab.compare import judge  # noqa: E402
from ragmon.ab.stats import Delta, mean_delta, rate_delta  # noqa: E402
from ragmon.config import AbSettings  # noqa: E402

Draw = Callable[[np.random.Generator, int], Delta]


def grid(lo: int, hi: int, step: float = 1.12) -> list[int]:
    out, n = [], float(lo)
    while n <= hi:
        if not out or int(n) != out[-1]:
            out.append(int(n))
        n *= step
    return out


def ok_share(draw: Draw, name: str, tolerance: float, n: int, runs: int, rng: np.random.Generator) -> float:
    return sum(judge(name, draw(rng, n), tolerance).status == "ok" for _ in range(runs)) / runs


def needed(draw: Draw, name: str, tolerance: float, runs: int, seed: int, hi: int) -> tuple[int | None, int | None]:
    """(smallest n with ok in ≥ 50 % of draws, smallest with ≥ 80 %) on the grid; None beyond ``hi``."""
    rng = np.random.default_rng(seed)
    half = eighty = None
    for n in grid(20, hi):
        share = ok_share(draw, name, tolerance, n, runs, rng)
        if half is None and share >= 0.5:
            half = n
        if share >= 0.8:
            eighty = n
            break
    return half, eighty


def feedback(rng: np.random.Generator, n: int) -> Delta:
    a = np.where(rng.random(n) < 0.7, 1.0, -1.0)
    b = np.where(rng.random(n) < 0.7, 1.0, -1.0)
    return mean_delta(a.tolist(), b.tolist())


def rate(p: float) -> Draw:
    def draw(rng: np.random.Generator, n: int) -> Delta:
        return rate_delta(int(rng.binomial(n, p)), n, int(rng.binomial(n, p)), n)
    return draw


def latency(rng: np.random.Generator, n: int) -> Delta:
    mu, sigma = math.log(1200.0), 0.6
    return mean_delta(rng.lognormal(mu, sigma, n).tolist(), rng.lognormal(mu, sigma, n).tolist())


def quality(rng: np.random.Generator, n: int) -> Delta:
    return mean_delta(rng.beta(8, 2, n).tolist(), rng.beta(8, 2, n).tolist())


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", type=int, default=400, help="draws per arm size")
    p.add_argument("--max-n", type=int, default=60_000, help="largest arm size tried")
    p.add_argument("--seed", type=int, default=35)
    args = p.parse_args()
    d = AbSettings()
    cases: list[tuple[str, str, Draw, float]] = [
        ("feedback (±1, 70 % up)", "feedback", feedback, d.max_feedback_drop),
        ("feedback (±1, 70 % up)", "feedback", feedback, 0.02),
        *((f"a rate at {p:.0%}", "resolved", rate(p), d.max_rate_harm) for p in (0.05, 0.10, 0.30, 0.50)),
        ("latency_ms (log-normal, mean ≈ 1.5 s)", "latency_ms", latency, d.max_latency_increase_ms),
        ("quality (Beta(8, 2), sd ≈ 0.12)", "faithfulness", quality, d.max_quality_drop),
    ]
    print(f"two identical arms, {args.runs} draws per size, 95 % intervals: smallest n per arm with 'ok' in ≥ 50 % "
          "and ≥ 80 % of the draws")
    print(f"{'measure':40} {'tolerance':>10} {'ok ≥ 50 %':>10} {'ok ≥ 80 %':>10}")
    for i, (label, name, draw, tolerance) in enumerate(cases):
        half, eighty = needed(draw, name, tolerance, args.runs, args.seed + i, args.max_n)
        fmt = lambda n: f"{n:,}" if n is not None else f"> {args.max_n:,}"  # noqa: E731
        print(f"{label:40} {tolerance:>10g} {fmt(half):>10} {fmt(eighty):>10}", flush=True)


if __name__ == "__main__":
    main()
