"""`ragmon score --from-store` against a slow LLM judge: traces/s of a backfill, with and without hanging calls.

    python3 bench/score_backfill.py                                  # 1,000 stored traces, the matrix below
    python3 bench/score_backfill.py --traces 2000 --configs default,32
    python3 bench/score_backfill.py --hang-rates 0.02 --latency-ms 1500 --jitter-ms 500

The judge endpoint is ``tests/support/openai_server.py``'s ``Provider`` in its own process, over a real socket:
an OpenAI-compatible chat-completions server answering after ``--latency-ms`` ± ``--jitter-ms`` (uniform), with a
share ``--hang-rates`` of calls that never answer in time (they hold on for ``--hang-ms``; the judge gives up
after ``judge.timeout_seconds``, 30 s by default, and retries), and no rate limit unless ``--rpm``. The traces
(each with its own content: no verdict cache hits) are loaded once into an embedded chDB store with ``ragmon
ingest --file``; then each configuration runs the real command, ``ragmon score --from-store --judge openai --rate
1``, as its own process, and the figure is traces judged (scored or failed) per second over the scoring itself
(the command's own timer: after the store opened, until the last rows were written; start-up excluded).

Configurations (``--configs``, comma separated): ``default`` is the settings as shipped; a number N sets
``judge.max_in_flight`` to N (with whatever else the defaults say); ``Nfixed`` also turns
``judge.adaptive_concurrency`` off (exactly N calls at once, as before the adaptive limit existed). Each (hang rate, configuration) gets a fresh
provider process, so one run's hanging calls do not hold the next run's server threads. The machine's load is
printed with the figures: on a shared machine, compare runs made together.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import re
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WORDS = ("consent withdrawal marketing message customer policy account refund billing invoice period notice "
         "contract renewal data privacy request access deletion processing retention days month fee").split()


def traces(n: int, seed: int = 7) -> list[dict]:
    rng = random.Random(seed)
    now = datetime.now(UTC)

    def text() -> str:
        return " ".join(" ".join(rng.choice(WORDS) for _ in range(rng.randint(6, 14))).capitalize() + "."
                        for _ in range(4))

    out = []
    for i in range(n):
        chunks = [text() for _ in range(5)]
        out.append({
            "trace_id": f"bf-{i}", "query_id": f"bq-{i}",
            "timestamp": (now - timedelta(minutes=30, seconds=i)).isoformat(),
            "retriever": {"name": "hybrid", "version": "v1", "variant": "production"},
            "corpus_snapshot": "s1", "index_version": "i1", "question": f"What does the policy say about {i}?",
            "category": f"c{i % 5}", "answer": " ".join(c.split(". ")[0] + "." for c in chunks[:3]),
            "behaviour": "answer",
            "retrieved": [{"chunk_id": f"c{i}-{j}", "doc_id": "d", "doc_version": "1", "score": 1 - j / 10,
                           "rank": j + 1, "text": c} for j, c in enumerate(chunks)],
            "context": {"chunk_ids": [f"c{i}-{j}" for j in range(3)], "tokens": 300},
            "citations": [{"sentence": 0, "chunk_id": f"c{i}-0", "quote": chunks[0][:30]}],
        })
    return out


def start_provider(args: argparse.Namespace, hang_rate: float) -> tuple[subprocess.Popen, str]:
    cmd = [sys.executable, "-m", "tests.support.openai_server", "--latency-ms", str(args.latency_ms), "--jitter-ms",
           str(args.jitter_ms), "--error-rate", "0", "--hang-rate", str(hang_rate), "--hang-ms", str(args.hang_ms)]
    if args.rpm:
        cmd += ["--rpm", str(args.rpm)]
    server = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                              env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert server.stdout is not None
    return server, server.stdout.readline().strip()


def score(env: dict[str, str]) -> dict:
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "ragmon", "score", "--from-store", "--since", "2h", "--judge",
                           "openai", "--rate", "1", "--log-level", "WARNING"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=3600)
    wall = time.monotonic() - started
    if done.returncode != 0:
        raise SystemExit(f"ragmon score failed ({done.returncode}): {done.stderr[-2000:]}")
    # "decisions: sampled 1,000; scored 985, failed 15, judge cost $0.0000, 61.2s"
    m = re.search(r"scored ([\d,]+), failed ([\d,]+), judge cost \$[\d.]+, ([\d.]+)s", done.stdout)
    if m is None:
        raise SystemExit(f"no summary in the output: {done.stdout[-2000:]}")
    scored, failed, seconds = int(m[1].replace(",", "")), int(m[2].replace(",", "")), float(m[3])
    return {"scored": scored, "failed": failed, "seconds": seconds, "wall": wall,
            "per_second": (scored + failed) / seconds}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--traces", type=int, default=1000)
    p.add_argument("--latency-ms", type=float, default=800.0)
    p.add_argument("--jitter-ms", type=float, default=300.0)
    p.add_argument("--hang-rates", default="0,0.02", help="shares of hanging calls, comma separated")
    p.add_argument("--hang-ms", type=float, default=120_000)
    p.add_argument("--rpm", type=float, default=0.0, help="the provider's requests per minute (0: no limit)")
    p.add_argument("--configs", default="default,8,32", help="'default' and/or judge.max_in_flight values")
    args = p.parse_args()
    work = Path(tempfile.mkdtemp(prefix="ragmon-backfill-"))
    env = dict(os.environ, PYTHONPATH=str(ROOT), RAGMON_STORE__DSN=f"chdb://{work / 'chdb'}", COLUMNS="200",
               RAGMON_JUDGE__MODEL="bench-judge", RAGMON_JUDGE__CACHE_MAX_ENTRIES="0")
    lines = work / "traces.jsonl"
    lines.write_text("\n".join(json.dumps(t) for t in traces(args.traces)) + "\n")
    loaded = subprocess.run([sys.executable, "-m", "ragmon", "ingest", "--file", str(lines)], cwd=ROOT, env=env,
                            capture_output=True, text=True, timeout=600)
    if loaded.returncode != 0:
        raise SystemExit(f"ingest failed: {loaded.stderr[-2000:]}")
    print(f"{args.traces:,} stored traces; provider {args.latency_ms:g} ± {args.jitter_ms:g} ms"
          f"{f', {args.rpm:g} requests/min' if args.rpm else ', no rate limit'}; hanging calls hold on "
          f"{args.hang_ms / 1000:g} s; {platform.python_version()}, {os.cpu_count()} cores, load "
          f"{os.getloadavg()[0]:.1f}", flush=True)
    print(f"{'hanging':>8} {'config':>22} {'scored':>7} {'failed':>7} {'seconds':>8} {'traces/s':>9}", flush=True)
    for hang in (float(h) for h in args.hang_rates.split(",")):
        for config in args.configs.split(","):
            run_env = dict(env)
            if config != "default":
                run_env["RAGMON_JUDGE__MAX_IN_FLIGHT"] = config.removesuffix("fixed")
            if config.endswith("fixed"):
                run_env["RAGMON_JUDGE__ADAPTIVE_CONCURRENCY"] = "false"
            server, url = start_provider(args, hang)
            try:
                run_env["RAGMON_JUDGE__BASE_URL"] = url
                r = score(run_env)
            finally:
                server.terminate()
                server.wait(timeout=30)
            label = ("defaults" if config == "default" else f"max_in_flight={config.removesuffix('fixed')}"
                     + (" fixed" if config.endswith("fixed") else ""))
            print(f"{hang:>8.0%} {label:>22} {r['scored']:>7,} {r['failed']:>7,} {r['seconds']:>8.1f} "
                  f"{r['per_second']:>9.1f}   (load {os.getloadavg()[0]:.1f})", flush=True)


if __name__ == "__main__":
    main()
