"""How long the weekly review selection and the review pages take on the embedded store (chDB).

    python3 bench/review.py                      # 200,000 production traces in the week, best of 5
    python3 bench/review.py --traces 2000000 --rounds 3

The week's traffic is generated inside ClickHouse (INSERT … SELECT FROM numbers), so the figure is the
selection query itself: one scan of trace_id/category over the week with FINAL, ordered by the seeded hash.
Pages are timed through FastAPI's in-process client (no network), median of --requests calls.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fastapi.testclient import TestClient  # noqa: E402
from pydantic import SecretStr  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from bench.timing import best_of  # noqa: E402
from ragmon.config import ReviewSettings, ReviewUser, StoreSettings  # noqa: E402
from ragmon.review.auth import hash_password, token_digest  # noqa: E402
from ragmon.review.queries import ClickHouseReviewQueries  # noqa: E402
from ragmon.review.role import ReviewRole  # noqa: E402
from ragmon.review.selection import parse_week, previous_week, sample_week, select_week  # noqa: E402
from ragmon.server import Health, create_app  # noqa: E402
from ragmon.store import ClickHouseStore  # noqa: E402
from ragmon.telemetry import Telemetry  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--traces", type=int, default=200_000, help="production traces in the week (default 200,000)")
    ap.add_argument("--size", type=int, default=50, help="sample size (default 50)")
    ap.add_argument("--rounds", type=int, default=5, help="selection rounds; the best is reported (default 5)")
    ap.add_argument("--requests", type=int, default=30, help="page requests to time (default 30)")
    args = ap.parse_args()

    tmp = tempfile.mkdtemp(prefix="ragmon-bench-review-")
    store = ClickHouseStore.open(StoreSettings(dsn=SecretStr(f"chdb://{tmp}"), database="bench"))
    week = previous_week(datetime.now(UTC))
    start, _ = parse_week(week)
    t0 = time.perf_counter()
    store.command(
        f"INSERT INTO {store.table('traces')} (trace_id, query_id, ts, retriever_name, variant, category, question, "
        "retrieved_chunk_ids, retrieved_doc_ids, retrieved_doc_versions, retrieved_scores, retrieved_ranks, "
        "retrieved_texts, retrieved_tenants, answer, behaviour, ingested_at) "
        "SELECT concat('t-', toString(number)), concat('q-', toString(number)), "
        "{start:DateTime64(3)} + toIntervalMillisecond(number * intDiv(604800000, {n:UInt64})), 'hybrid', "
        "'production', ['billing','consent','shipping','returns','rare'][1 + (number % 97 = 0 ? 4 : number % 4)], "
        "'How do I…?', ['c1','c2'], ['d1','d2'], ['v','v'], [0.9, 0.5], [1, 2], ['text one', 'text two'], ['', ''], "
        "'An answer.', 'answer', now64(3) FROM numbers({n:UInt64})",
        {"start": start, "n": args.traces})
    load_s = time.perf_counter() - t0

    review = ClickHouseReviewQueries(store)
    plain = best_of(args.rounds, lambda: sample_week(review, week, args.size, "bench-seed"))
    strat = best_of(args.rounds,
                    lambda: sample_week(review, week, args.size, "bench-seed", stratify=True, min_per_stratum=5))
    select_week(review, week, args.size, seed="bench-seed", now=datetime.now(UTC))

    settings = ReviewSettings(users=[ReviewUser(username="b", password_hash=SecretStr(hash_password("benchpass")),
                                                token_sha256=SecretStr(token_digest("tok")))],
                              session_secret=SecretStr("b" * 32))
    role = ReviewRole(settings, store, Telemetry())
    client = TestClient(create_app(Telemetry(), Health(), routers=[role.router]))
    auth = {"Authorization": "Bearer tok"}
    first = client.get(f"/review/api/v1/weeks/{week}/queue", headers=auth).json()["items"][0]["trace_id"]

    def median_ms(url: str) -> float:
        times = []
        for _ in range(args.requests):
            t0 = time.perf_counter()
            assert client.get(url, headers=auth).status_code == 200
            times.append(time.perf_counter() - t0)
        return statistics.median(times) * 1000

    queue_ms = median_ms(f"/review/api/v1/weeks/{week}/queue")
    item_ms = median_ms(f"/review/api/v1/weeks/{week}/items/{first}")

    table = Table("what", "figure", title=f"review bench: {args.traces:,} production traces in {week}, sample "
                  f"{args.size} ({os.cpu_count()} cores, {platform.python_implementation()} "
                  f"{platform.python_version()}, chDB)")
    table.add_row("load the week (INSERT … SELECT, once)", f"{load_s:.2f} s")
    table.add_row(f"select {args.size} uniformly (best of {args.rounds})", f"{plain * 1000:.0f} ms")
    table.add_row(f"select {args.size}, ≥5 per stratum (best of {args.rounds})", f"{strat * 1000:.0f} ms")
    table.add_row(f"queue API (median of {args.requests})", f"{queue_ms:.1f} ms")
    table.add_row(f"item API (median of {args.requests})", f"{item_ms:.1f} ms")
    Console().print(table)


if __name__ == "__main__":
    main()
