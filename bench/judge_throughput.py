"""Live scoring with an LLM judge at production rates: the score loop against a slow, rate-limited local provider.

    python3 bench/judge_throughput.py                             # 600 requests/minute, 800 ± 300 ms, 1 % 500s
    python3 bench/judge_throughput.py --rpm 0 --in-flight 32      # no rate limit
    python3 bench/judge_throughput.py --client-rpm 600            # judge.requests_per_minute set to the limit

The provider is ``tests/support/openai_server.py``'s ``Provider`` in its own process, over a real socket: an
OpenAI-compatible endpoint answering after ``--latency-ms`` ± ``--jitter-ms`` (uniform), answering 429 with
``retry-after-ms`` beyond ``--rpm`` (a token bucket with one second of burst, as providers enforce per-minute
limits in short windows), and 500 for a share ``--error-rate`` of requests. Each ``--in-flight`` value runs in
a fresh process: the real live loop (``ragmon.score.consume``: decide at rate 1, judge with ``OpenAIJudge``,
write to an embedded chDB store, commit) fed by an endless in-memory topic, for ``--seconds``. Reported, over the
part after ``--warmup`` (the adaptive limit settles meanwhile):

* judged traces/s, and the share of the provider's limit it is;
* the request rate the judge settled at (``CallLimiter.limit``, per minute), and 429s: count and share of calls;
* p50/p99 latency per trace: from the judge call's start to its verdict, waits for the limiter and retries
  included (not the time queued for a free slot);
* peak RSS of the score process, and how much of it is above the process's size once the store was open (the
  embedded chDB engine alone is ~300 MB; a production score pod writes to a ClickHouse server over HTTP and
  does not carry it — ``--store none`` discards the rows to show the process without it).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

WORDS = ("consent withdrawal marketing message customer policy account refund billing invoice period notice "
         "contract renewal data privacy request access deletion processing retention days month fee").split()


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--in-flight", default="1,8,32,64", help="judge.max_in_flight values, comma separated")
    p.add_argument("--seconds", type=float, default=75.0, help="run length per value")
    p.add_argument("--warmup", type=float, default=25.0, help="seconds left out of the figures (settling)")
    p.add_argument("--latency-ms", type=float, default=800.0)
    p.add_argument("--jitter-ms", type=float, default=300.0)
    p.add_argument("--rpm", type=float, default=600.0, help="the provider's requests per minute; 0: no limit")
    p.add_argument("--error-rate", type=float, default=0.01, help="share of requests the provider answers 500")
    p.add_argument("--client-rpm", type=float, default=None, help="judge.requests_per_minute (default: unset)")
    p.add_argument("--store", choices=("chdb", "none"), default="chdb")
    p.add_argument("--chunks", type=int, default=5, help="context chunks per trace")
    p.add_argument("--chunk-chars", type=int, default=400, help="characters per chunk")
    p.add_argument("--child", nargs=2, metavar=("BASE_URL", "IN_FLIGHT"), help=argparse.SUPPRESS)
    return p.parse_args()


# -- the score process (child) ----------------------------------------------------------------------------------

class EndlessTopic:
    """One partition that always has ``max_records`` more traces, each with its own content (no cache hits)."""

    def __init__(self, chunks: int, chunk_chars: int, max_records: int = 500):
        import random

        rng = random.Random(7)

        def text() -> str:
            out: list[str] = []
            while sum(map(len, out)) < chunk_chars:
                out.append(" ".join(rng.choice(WORDS) for _ in range(rng.randint(6, 14))).capitalize() + ".")
            return " ".join(out)

        self.texts = [text() for _ in range(200)]
        self.chunks, self.max_records = chunks, max_records
        self.offset, self.paused, self.commits = 0, False, 0

    def trace(self, i: int) -> dict[str, Any]:
        picked = [self.texts[(i * 7 + j * 13) % len(self.texts)] for j in range(self.chunks)]
        ids = [f"c{(i * 7 + j * 13) % len(self.texts)}" for j in range(self.chunks)]
        answer = " ".join(t.split(". ")[0] + "." for t in picked[:3]) + f" Case {i}."
        return {"trace_id": f"t{i}", "query_id": f"q{i}", "timestamp": "2026-12-01T12:00:00Z",
                "retriever": {"name": "hybrid", "version": "v1"}, "question": f"What does the policy say ({i})?",
                "category": f"c{i % 5}", "answer": answer,
                "retrieved": [{"chunk_id": c, "doc_id": "d", "score": 1 - j / 10, "rank": j + 1, "text": t}
                              for j, (c, t) in enumerate(zip(ids, picked, strict=True))],
                "citations": [{"sentence": 0, "chunk_id": ids[0], "quote": picked[0][:30]}]}

    def poll(self, timeout_seconds: float | None = None) -> list[Any]:
        from ragmon.score.sources import Polled

        if self.paused:
            time.sleep(min(timeout_seconds or 0.05, 0.05))
            return []
        out = [Polled(("bench", 0), o, self.trace(o)) for o in range(self.offset, self.offset + self.max_records)]
        self.offset += self.max_records
        return out

    def commit(self, offsets: dict) -> None:
        self.commits += 1

    def pause(self) -> None:
        self.paused = True

    def resume(self) -> None:
        self.paused = False


class TimedJudge:
    """The judge, with the wall time of each verdict recorded (start, end) for traces it judged."""

    def __init__(self, judge: Any):
        self._judge = judge
        self.times: list[tuple[float, float]] = []
        self._lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._judge, name)

    def assess(self, item: Any) -> Any:
        start = time.monotonic()
        out = self._judge.assess(item)
        with self._lock:
            self.times.append((start, time.monotonic()))
        return out


class DiscardingStore:
    """``--store none``: rows are counted and dropped (to show the score process without the embedded engine)."""

    def __init__(self) -> None:
        self.rows = 0

    def insert_columns(self, table: str, columns: dict, dedup_token: str | None = None) -> None:
        self.rows += len(columns["trace_id"])


def child(args: argparse.Namespace) -> None:
    from ragmon.judge.openai import OpenAIJudge
    from ragmon.sampling.sampler import ScoreSampler
    from ragmon.score.consume import consume
    from ragmon.score.pipeline import LiveScorer
    from ragmon.telemetry import Telemetry

    base_url, in_flight = args.child[0], int(args.child[1])
    if args.store == "chdb":
        from pydantic import SecretStr

        from ragmon.config import StoreSettings
        from ragmon.store import ClickHouseStore

        store: Any = ClickHouseStore.open(StoreSettings(dsn=SecretStr(f"chdb://{tempfile.mkdtemp(prefix='rb-')}")))
    else:
        store = DiscardingStore()
    base_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    telemetry = Telemetry()
    judge = OpenAIJudge(base_url=base_url, model="bench-judge", max_in_flight=in_flight,
                        requests_per_minute=args.client_rpm, cache_max_entries=0, telemetry=telemetry)
    timed = TimedJudge(judge)
    scorer = LiveScorer(store, timed, ScoreSampler(salt="bench", rate=1.0), telemetry, max_in_flight=in_flight)
    limiter = judge.limiter
    stop = threading.Event()
    started = time.monotonic()
    marks: dict[str, tuple[int, int]] = {}
    threading.Timer(args.warmup, lambda: marks.setdefault("warm", (limiter.sent, limiter.overloads))).start()
    threading.Timer(args.seconds, stop.set).start()
    consume(scorer, EndlessTopic(args.chunks, args.chunk_chars), stop=stop, drain_seconds=0.0)
    end = started + args.seconds
    sent0, over0 = marks.get("warm", (0, 0))
    warm_at = started + args.warmup
    settled = [(s, e) for s, e in timed.times if warm_at <= e <= end]
    latencies = sorted(e - s for s, e in settled)
    q = statistics.quantiles(latencies, n=100) if len(latencies) >= 2 else [float("nan")] * 99
    calls = limiter.sent - sent0
    print(json.dumps({
        "judged_per_second": len(settled) / (args.seconds - args.warmup),
        "limit_per_minute": None if limiter.limit is None else limiter.limit * 60,
        "rate_limited": limiter.overloads - over0, "calls": calls, "rate_limited_total": limiter.overloads,
        "p50": q[49], "p99": q[98], "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "base_rss_mb": base_rss,
    }), flush=True)
    os._exit(0)  # judge calls still running are abandoned, as on SIGTERM


# -- the parent: one provider and one score process per value ---------------------------------------------------

def run_one(args: argparse.Namespace, in_flight: int) -> dict[str, Any]:
    server = subprocess.Popen(
        [sys.executable, "-m", "tests.support.openai_server", "--latency-ms", str(args.latency_ms), "--jitter-ms",
         str(args.jitter_ms), "--error-rate", str(args.error_rate)] + (["--rpm", str(args.rpm)] if args.rpm else []),
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        env=dict(os.environ, PYTHONPATH=str(ROOT)))
    try:
        assert server.stdout is not None
        base_url = server.stdout.readline().strip()
        cmd = [sys.executable, str(Path(__file__).resolve()), "--child", base_url, str(in_flight),
               "--seconds", str(args.seconds), "--warmup", str(args.warmup), "--store", args.store,
               "--chunks", str(args.chunks), "--chunk-chars", str(args.chunk_chars)]
        if args.client_rpm:
            cmd += ["--client-rpm", str(args.client_rpm)]
        out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=args.seconds + 300,
                             env=dict(os.environ, PYTHONPATH=str(ROOT)))
        if out.returncode != 0:
            raise SystemExit(f"score process failed:\n{out.stderr[-3000:]}")
        return json.loads(out.stdout.strip().splitlines()[-1])
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(30)


def main() -> None:
    args = parse()
    if args.child:
        child(args)
        return
    limit = f"{args.rpm:g} requests/min" if args.rpm else "no rate limit"
    client = f"judge.requests_per_minute={args.client_rpm:g}" if args.client_rpm else "judge.requests_per_minute unset"
    print(f"machine: {os.cpu_count()} cores, {platform.python_implementation()} {platform.python_version()}, "
          f"load {os.getloadavg()[0]:.1f}; provider: {args.latency_ms:g} ± {args.jitter_ms:g} ms, {limit}, "
          f"{args.error_rate:.0%} 500s; {client}; store {args.store}; figures over {args.seconds - args.warmup:g} s "
          f"after {args.warmup:g} s of warm-up")
    print(f"{'in flight':>9} {'judged/s':>9} {'of limit':>8} {'settled limit/min':>17} {'429s':>11} "
          f"{'p50 s':>6} {'p99 s':>6} {'peak RSS MB':>11} {'above store':>11}")
    for in_flight in [int(v) for v in args.in_flight.split(",")]:
        r = run_one(args, in_flight)
        share = f"{r['judged_per_second'] / (args.rpm / 60):.0%}" if args.rpm else "-"
        settled = "none" if r["limit_per_minute"] is None else f"{r['limit_per_minute']:.0f}"
        refused = f"{r['rate_limited']} ({r['rate_limited'] / max(1, r['calls']):.1%})"
        print(f"{in_flight:>9} {r['judged_per_second']:>9.2f} {share:>8} {settled:>17} {refused:>11} "
              f"{r['p50']:>6.2f} {r['p99']:>6.2f} {r['peak_rss_mb']:>11.0f} "
              f"{r['peak_rss_mb'] - r['base_rss_mb']:>11.0f}", flush=True)


if __name__ == "__main__":
    main()
