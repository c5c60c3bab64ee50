"""How fast every console page and ``drift explain`` answer on a big store: p50, p95 and max per page.

    python3 bench/console.py                       # 10 million traces (a few GB of chDB data; ~10+ minutes)
    python3 bench/console.py --n 200000            # a quick look
    python3 bench/console.py --dir /tmp/big        # keep the store: a second run with the same --dir and --n
                                                   # skips the generation and only times the pages
    python3 bench/console.py --json out.json       # the figures as JSON too

The store (embedded chDB, ``--dir`` or a temporary directory) is filled the way ``bench/drift.py`` fills it,
inside ClickHouse (``ragmon.drift.simulation.synthetic``: ``INSERT … SELECT … FROM numbers()``, never a row built in
Python): N traces spread evenly over every hour of the 8 days before the current hour and the current hour itself
(the drift check's trailing week of reference windows and the CUSUM's day before it), two production retrievers
(hybrid@v1 two thirds of the traffic, dense@v2 the rest) × three strata, questions Zipf-popular among a million,
and an incident in the current hour: half of dense@v2's traces answered from a stale corpus snapshot with lower
scores (for the Drift and incident pages and ``drift explain``). Then, still inside the engine:

* a shadow retriever (hybrid@v2, variant shadow) answering a share (``--shadow-share``, 5 %) of hybrid@v1's
  queries of the last 24 hours — the Shadow page's pairs and the trace page's twin;
* judge scores (faithfulness and answer_relevance, one fingerprint) for a sampled share of the queries
  (``--scored-share``, 10 %), both sides of a shadow pair alike;
* the real drift check (``DriftChecker.run_once``, default features) at the generation time, then its rows
  copied back one check interval at a time to fill a week of checks (``--history``, 168: the drift pages read
  the history of every group);
* a dead-letter file of 1,000 letters (the console reads the file, not a topic) and two gate run artifacts
  written by ``ragmon gate`` (a subprocess, the example golden set).

Then the real console is served (the review role's router with the console's next to it, as ``ragmon.process``
mounts them, on a real port through uvicorn), one user signs in once with an httpx client, and each page is
requested ``--repeat`` times in turn (every page once, then again: caches see what a reader would see) after one
warm-up round whose times are reported apart as "first". ``drift explain`` is timed as the command runs it after
opening the store (its applied settings, ``run_explain``, the JSON), in this process: a second process cannot
open an embedded store that this one holds. p95 is the nearest-rank 95th percentile of the ``--repeat`` times
(with 20: the second slowest). The console's clock is the generation time, so a reused ``--dir`` shows the same
windows. Prints a table and one summary line; asserts nothing.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import platform
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from html import unescape
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx  # noqa: E402
from pydantic import SecretStr  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from ragmon.config import (  # noqa: E402
    ConsoleSettings,
    DriftSettings,
    ReviewSettings,
    ReviewUser,
    Settings,
    StoreSettings,
)
from ragmon.console.router import console_router, redirect_router  # noqa: E402
from ragmon.drift.check.check import DriftChecker  # noqa: E402
from ragmon.drift.simulation.synthetic import SyntheticSpec, insert_synthetic  # noqa: E402
from ragmon.review.auth import hash_password, token_digest  # noqa: E402
from ragmon.review.role import ReviewRole  # noqa: E402
from ragmon.server import Health, create_app, serve  # noqa: E402
from ragmon.store import ClickHouseStore  # noqa: E402
from ragmon.stream.dead_letter import DeadLetter  # noqa: E402
from ragmon.stream.dead_letter_file import FileDeadLetterSink  # noqa: E402
from ragmon.telemetry import Telemetry  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
USER, PASSWORD = "oncall", "bench password 3am"
TARGET = 1.0  # seconds, at the 95th percentile
#: the group whose scores drop in the current hour
INCIDENT = {"retriever": "dense@v2", "variant": "production", "stratum": "billing", "feature": "top1_score"}
METRICS = ("faithfulness", "answer_relevance")
MARKER = "bench-console.json"


def generate(store: ClickHouseStore, n: int, now: datetime, shadow_share: float, scored_share: float,
             questions: int, console: Console) -> dict[str, float]:
    """N traces over the 8 days before the current hour and the current hour, evenly per hour; then the shadow
    pairs and the scores. Returns the seconds each step took."""
    took: dict[str, float] = {}
    started = time.perf_counter()
    cur_start = now - timedelta(hours=1)
    hours = 8 * 24 + 1
    per_day = n * 24 // hours
    # hybrid@v1 serves two thirds of the traffic (the busiest production retriever: the one the Shadow page
    # compares the shadow retriever with), dense@v2 the rest
    retrievers = ("hybrid@v1", "hybrid@v1", "dense@v2")
    specs = [SyntheticSpec(per_day, cur_start - timedelta(days=d + 1), cur_start - timedelta(days=d), seed=d + 1,
                           retrievers=retrievers, questions=questions) for d in range(8)]
    current = n - per_day * 8
    dense = current // 3
    specs.append(SyntheticSpec(current - dense, cur_start, now, seed=100, retrievers=("hybrid@v1",), run_id="cur",
                               questions=questions))
    # the incident: half of dense@v2's current hour answered from a stale corpus snapshot, whose scores are lower
    specs.append(SyntheticSpec(dense // 2, cur_start, now, seed=101, retrievers=("dense@v2",), run_id="cur",
                               questions=questions))
    specs.append(SyntheticSpec(dense - dense // 2, cur_start, now, seed=102, retrievers=("dense@v2",), shift=-0.06,
                               corpus_snapshot="2026-10-01", run_id="cur-stale", questions=questions))
    for spec in specs:
        insert_synthetic(store, spec)
    took["traces"] = time.perf_counter() - started
    console.print(f"  {n:,} traces in {took['traces']:.1f}s")

    started = time.perf_counter()
    traces = store.table("traces")
    # a shadow twin for a share of hybrid@v1's last 24 hours: the same query, another retriever, slightly other
    # chunks and scores (``SELECT * REPLACE``: every stored column copied but these)
    # (the rows are picked in a subquery: in ClickHouse the SELECT's aliases, such as 'shadow' AS variant, would
    # otherwise stand for the columns of the same name in its WHERE)
    store.command(
        f"INSERT INTO {traces} SELECT * REPLACE (concat('sh-', trace_id) AS trace_id, 'hybrid' AS retriever_name, "
        "'v2' AS retriever_version, 'shadow' AS variant, "
        "arrayMap((c, i) -> if(cityHash64(trace_id, i) % 4 = 0, concat(c, '-alt'), c), retrieved_chunk_ids, "
        "arrayEnumerate(retrieved_chunk_ids)) AS retrieved_chunk_ids, "
        "arrayMap(s -> s + 0.01, retrieved_scores) AS retrieved_scores, latency_total_ms * 1.2 AS latency_total_ms, "
        "now64(3, 'UTC') AS ingested_at) "
        f"FROM (SELECT * FROM {traces} WHERE variant = 'production' AND retriever_name = 'hybrid' "
        "AND ts >= {since:DateTime64(3)} AND ts < {until:DateTime64(3)} "
        "AND cityHash64(query_id, 'shadow') % 10000 < {share:UInt32})",
        {"since": (now - timedelta(hours=24)).replace(tzinfo=None), "until": now.replace(tzinfo=None),
         "share": int(round(shadow_share * 10_000))})
    took["shadow"] = time.perf_counter() - started

    started = time.perf_counter()
    scores = store.table("scores")
    # judge scores for a sampled share of the queries (both sides of a shadow pair alike), a day at a time
    start = now - timedelta(days=8, hours=1)
    while start < now:
        end = min(start + timedelta(days=1), now)
        store.command(
            f"INSERT INTO {scores} (trace_id, query_id, ts, scored_at, retriever_name, retriever_version, variant, "
            "category, metric, value, status, error, judge_name, judge_fingerprint, details) "
            "SELECT trace_id, query_id, ts, ts + toIntervalSecond(30), retriever_name, retriever_version, variant, "
            "category, metric, "
            "least(1.0, greatest(0.0, if(isFinite(top1_score), top1_score, 0.5) + 0.2 "
            "  + ((cityHash64(trace_id, metric) % 1000) / 1000.0 - 0.5) * 0.4)), 'ok', '', 'bench-judge', "
            "'fp-bench', '{\"why\": \"bench\"}' "
            f"FROM {traces} ARRAY JOIN {{metrics:Array(String)}} AS metric "
            "WHERE ts >= {start:DateTime64(3)} AND ts < {end:DateTime64(3)} "
            "AND cityHash64(query_id, 'judge') % 10000 < {share:UInt32}",
            {"metrics": list(METRICS), "start": start.replace(tzinfo=None), "end": end.replace(tzinfo=None),
             "share": int(round(scored_share * 10_000))})
        start = end
    took["scores"] = time.perf_counter() - started

    started = time.perf_counter()
    store.command(f"OPTIMIZE TABLE {traces} FINAL")  # as bench/drift.py: the parts a settled store would have
    store.command(f"OPTIMIZE TABLE {scores} FINAL")
    took["optimize"] = time.perf_counter() - started
    console.print(f"  shadow pairs {took['shadow']:.1f}s, scores {took['scores']:.1f}s, "
                  f"OPTIMIZE … FINAL {took['optimize']:.1f}s")
    return took


def drift_history(store: ClickHouseStore, now: datetime, history: int, console: Console) -> dict[str, float]:
    """The real drift check at ``now``, then its rows copied back one interval at a time (a week of checks)."""
    took: dict[str, float] = {}
    settings = DriftSettings()
    started = time.perf_counter()
    result = DriftChecker(store, settings, Telemetry(), clock=lambda: now).run_once()
    took["check"] = time.perf_counter() - started
    drifted = sorted({f"{r.group.retriever}/{r.group.stratum}/{r.feature}" for r in result.drifted})
    console.print(f"  drift check {took['check']:.1f}s: {len(result.results):,} results, drifted: "
                  f"{', '.join(drifted[:8]) or 'none'}{' …' if len(drifted) > 8 else ''}")
    started = time.perf_counter()
    step = int(settings.interval_seconds * 1000)
    table = store.table("drift_checks")
    if history > 1:
        store.command(
            f"INSERT INTO {table} SELECT * REPLACE (concat(check_id, '-h', toString(k)) AS check_id, "
            "checked_at - toIntervalMillisecond(k * {step:UInt64}) AS checked_at, "
            "reference_start - toIntervalMillisecond(k * {step:UInt64}) AS reference_start, "
            "reference_end - toIntervalMillisecond(k * {step:UInt64}) AS reference_end, "
            "current_start - toIntervalMillisecond(k * {step:UInt64}) AS current_start, "
            "current_end - toIntervalMillisecond(k * {step:UInt64}) AS current_end) "
            f"FROM {table} ARRAY JOIN range(1, {{history:UInt32}}) AS k",
            {"step": step, "history": history})
    took["history"] = time.perf_counter() - started
    return took


def side_files(directory: Path, console: Console) -> tuple[Path, Path]:
    """A dead-letter file of 1,000 letters and two gate run artifacts; their paths."""
    letters = directory / "dead-letters.jsonl"
    if not letters.exists():
        sink = FileDeadLetterSink(letters)
        reasons = ("invalid_json", "schema", "too_large", "decode")
        sink.send([DeadLetter("rag.traces", i % 6, 1_000 + i, json.dumps({"trace_id": f"bad-{i}", "pad": "x" * 1500})
                              .encode(), reasons[i % 4], f"field {i % 17} is wrong ({reasons[i % 4]})")
                   for i in range(1_000)])
        sink.close()
    runs = directory / "gate-runs"
    if not any(runs.glob("run-*.json")):
        started = time.perf_counter()
        for k in (3, 5):
            done = subprocess.run(
                [sys.executable, "-c", "from ragmon.cli.app import main; main()", "gate",
                 str(ROOT / "examples/golden/dev.json"), "--retriever", "examples.retriever:search", "--k", str(k),
                 "--min-coverage", "0.5", "--min-mrr", "0.5", "--no-progress", "--format", "json", "--out",
                 str(runs)], cwd=ROOT, capture_output=True, text=True,
                env=dict(os.environ, PYTHONPATH=str(ROOT)))
            if done.returncode not in (0, 1):
                raise SystemExit(f"ragmon gate exited {done.returncode}:\n{done.stderr[-2000:]}")
        console.print(f"  two gate runs in {time.perf_counter() - started:.1f}s")
    return letters, runs


def app_settings(directory: Path, letters: Path, runs: Path) -> Settings:
    user = ReviewUser(username=USER, password_hash=SecretStr(hash_password(PASSWORD)),
                      token_sha256=SecretStr(token_digest("bench-api-token-0123456789")))
    review = ReviewSettings(users=[user], session_secret=SecretStr("b" * 40), cookie_secure=False)
    console = ConsoleSettings(gate_runs_dir=runs, dead_letter_file=letters, read_dead_letter_topic=False)
    return Settings(review=review, console=console,
                    store=StoreSettings(dsn=SecretStr(f"chdb://{directory}"), database="bench_console"))


def console_app(settings: Settings, store: ClickHouseStore, now: datetime) -> Any:
    """The review role's routes and the console's on one app, as ``ragmon.process`` builds them; the console's
    clock is ``now`` (the generation time)."""
    telemetry = Telemetry()
    role = ReviewRole(settings.review, store, telemetry)
    routers = [role.router, console_router(settings, store, role.context, clock=lambda: now.timestamp()),
               redirect_router()]
    return create_app(telemetry, Health(), routers=routers)


def sign_in(base: str) -> httpx.Client:
    client = httpx.Client(base_url=base, follow_redirects=False, timeout=120)
    page = client.get("/review/login")
    token = re.search(r'name="csrf_token" value="([^"]+)"', page.text)[1]  # type: ignore[index]
    r = client.post("/review/login", data={"username": USER, "password": PASSWORD, "csrf_token": token,
                                           "next": "/review/"})
    if r.status_code != 303:
        raise SystemExit(f"sign-in failed: {r.status_code} {r.text[:500]}")
    return client


def pages(client: httpx.Client, now: datetime) -> list[tuple[str, str]]:
    """(name, path) of each page to time; links found on the pages themselves, as a reader would click them."""
    p = "/review/console"
    hour = (now - timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    end = now.strftime("%Y-%m-%dT%H:%M:%SZ")
    inc = "&".join(f"{k}={v}" for k, v in INCIDENT.items())
    out = [
        ("trace list (24 h, newest first)", f"{p}/traces"),
        ("trace list filtered (group, answers)",
         f"{p}/traces?retriever=dense%40v2&variant=production&stratum=billing&behaviour=answer"),
        ("trace list by a judge score (faithfulness ↑)", f"{p}/traces?metric=faithfulness&order=asc"),
        ("trace list by a score, 0.2–0.6", f"{p}/traces?metric=faithfulness&min=0.2&max=0.6&order=desc"),
        ("trace list by top1_score, the drift window",
         f"{p}/traces?since={hour}&until={end}&retriever=dense%40v2&variant=production&stratum=billing"
         "&metric=top1_score&order=asc"),
        ("trace list, page 20", f"{p}/traces?page=20"),
    ]
    listing = client.get(f"{p}/traces?variant=shadow").text
    links = re.findall(r'href="(/review/console/traces/[^"]+\?at=[^"]+)"', listing)
    if links:
        link = unescape(links[0])
        out.append(("trace page (shadow, from the list)", link))
        production = re.search(r'href="(/review/console/traces/[^"]+\?at=[^"]+)"', client.get(link).text)
        if production:
            out.append(("trace page (its production twin)", unescape(production[1])))
        out.append(("trace page without ?at=", link.split("?")[0]))
    out += [
        ("drift (unfiltered)", f"{p}/drift"),
        ("drift (the alert's group)", f"{p}/drift?{inc}"),
        ("incident (the alert's group)", f"{p}/incident?{inc}"),
    ]
    incident = client.get(f"{p}/incident?{inc}").text
    segment = re.search(r'href="(/review/console/incident/traces\?[^"]+)"', incident)
    if segment:
        out.append(("incident: a segment's traces", unescape(segment[1])))
    out += [("shadow", f"{p}/shadow"), ("gate runs", f"{p}/gate")]
    run = re.search(r'href="(/review/console/gate/runs/[^"]+)"', client.get(f"{p}/gate").text)
    if run:
        out.append(("gate run", unescape(run[1])))
    out += [("dead letters", f"{p}/dead-letters"), ("runbooks", f"{p}/runbooks"),
            ("runbook", f"{p}/runbooks/RagmonRetrievalScoreDrift")]
    return out


def explain_call(store: ClickHouseStore, settings: Settings, now: datetime) -> Callable[[], object]:
    """What ``ragmon drift explain --group … --format json`` does once the store is open."""
    from ragmon.cli.drift_applied import applied_drift_settings
    from ragmon.cli.drift_explain import as_json
    from ragmon.drift.explain.explain_run import parse_group, run_explain

    group = parse_group(f"{INCIDENT['retriever']}/{INCIDENT['variant']}/{INCIDENT['stratum']}")

    def call() -> object:
        with contextlib.redirect_stderr(io.StringIO()):  # the command's "drift settings of the check …" line
            drift = applied_drift_settings(store, settings.drift)
        result = run_explain(store, drift, group, INCIDENT["feature"], None, now=now)
        return json.dumps(as_json(result))

    return call


def quantile(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, int(round(q * (len(s) - 1)))))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=10_000_000, help="traces to generate (default 10,000,000)")
    ap.add_argument("--repeat", type=int, default=20, help="timed requests per page (default 20)")
    ap.add_argument("--dir", type=Path, default=None, help="chDB data directory, kept (default: a temporary one); "
                    "reused without generating when it already holds a store of the same --n")
    ap.add_argument("--json", type=Path, default=None, help="also write the figures here")
    ap.add_argument("--questions", type=int, default=1_000_000, help="distinct questions, Zipf-popular")
    ap.add_argument("--shadow-share", type=float, default=0.05, help="share of hybrid@v1's last 24 h answered in "
                    "shadow too (default 0.05)")
    ap.add_argument("--scored-share", type=float, default=0.10, help="share of queries judged (default 0.10)")
    ap.add_argument("--history", type=int, default=168, help="stored drift checks per group (default 168: a week "
                    "of hourly checks)")
    ap.add_argument("--memory-mb", type=int, default=StoreSettings().embedded_memory_mb,
                    help="store.embedded_memory_mb (default: ragmon's)")
    args = ap.parse_args()
    if args.n < 10_000 or args.repeat < 1:
        ap.error("--n must be at least 10000 and --repeat at least 1")
    console = Console(width=150)
    tmp = None if args.dir else tempfile.TemporaryDirectory(prefix="ragmon-bench-console-")
    directory = (args.dir or Path(tmp.name)).resolve()  # type: ignore[union-attr]
    (directory / "chdb").mkdir(parents=True, exist_ok=True)
    marker = directory / MARKER
    letters, runs = side_files(directory, console)
    settings = app_settings(directory / "chdb", letters, runs)
    settings = settings.model_copy(update={"store": settings.store.model_copy(
        update={"embedded_memory_mb": args.memory_mb})})
    store = ClickHouseStore.open(settings.store)
    made: dict[str, Any] = json.loads(marker.read_text()) if marker.exists() else {}
    if made.get("n") == args.n:
        now = datetime.fromisoformat(made["now"])
        took = made["took"]
        console.print(f"reusing the store in {directory} ({args.n:,} traces generated at {now:%Y-%m-%d %H:%M} UTC)")
    else:
        for table in ("traces", "scores", "drift_checks"):
            store.command(f"TRUNCATE TABLE IF EXISTS {store.table(table)}")
        marker.unlink(missing_ok=True)
        now = datetime.now(UTC).replace(microsecond=0)
        console.print(f"generating {args.n:,} traces in {directory} …")
        took = generate(store, args.n, now, args.shadow_share, args.scored_share, args.questions, console)
        took |= drift_history(store, now, args.history, console)
        marker.write_text(json.dumps({"n": args.n, "now": now.isoformat(), "took": took}))
    counts = {t: int(store.query_rows(f"SELECT count() AS n FROM {store.table(t)}")[0]["n"])
              for t in ("traces", "scores", "drift_checks")}
    size = sum(p.stat().st_size for p in (directory / "chdb").rglob("*") if p.is_file())
    console.print(f"store: {counts['traces']:,} traces, {counts['scores']:,} scores, {counts['drift_checks']:,} "
                  f"drift check rows; {size / 2**30:.2f} GiB on disk")

    handle = serve(console_app(settings, store, now), "127.0.0.1", 0)
    try:
        client = sign_in(f"http://127.0.0.1:{handle.port}")
        todo: list[tuple[str, Callable[[], object]]] = []
        statuses: dict[str, int] = {}

        def get(name: str, path: str) -> Callable[[], object]:
            def call() -> object:
                r = client.get(path)
                statuses[name] = r.status_code
                return r
            return call

        for name, path in pages(client, now):
            todo.append((name, get(name, path)))
        todo.append(("ragmon drift explain (in process)", explain_call(store, settings, now)))
        first: dict[str, float] = {}
        times: dict[str, list[float]] = {name: [] for name, _ in todo}
        for rnd in range(args.repeat + 1):
            round_started = time.perf_counter()
            for name, fn in todo:
                started = time.perf_counter()
                fn()
                took_s = time.perf_counter() - started
                if rnd == 0:
                    first[name] = took_s
                else:
                    times[name].append(took_s)
            console.print(f"  round {rnd}/{args.repeat}{' (warm-up)' if rnd == 0 else ''}: "
                          f"{time.perf_counter() - round_started:.1f}s", highlight=False)
        client.close()
    finally:
        handle.stop()

    table = Table(title=f"console pages on {counts['traces']:,} traces (chDB, {args.repeat} requests each after "
                        f"one warm-up; {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f})")
    for col in ("page", "status", "first", "p50", "p95", "max", f"p95 < {TARGET:g} s"):
        table.add_column(col, justify="left" if col == "page" else "right")
    rows = []
    for name, _ in todo:
        xs = times[name]
        p50, p95, mx = statistics.median(xs), quantile(xs, 0.95), max(xs)
        ok = p95 < TARGET
        rows.append({"page": name, "status": statuses.get(name, 0), "first": first[name], "p50": p50, "p95": p95,
                     "max": mx, "ok": ok})
        status = str(statuses[name]) if name in statuses else "–"
        table.add_row(name, status, f"{first[name]:.3f}", f"{p50:.3f}", f"{p95:.3f}", f"{mx:.3f}",
                      "yes" if ok else "[red]NO[/]")
    console.print(table)
    missed = [r["page"] for r in rows if not r["ok"]]
    bad = [r["page"] for r in rows if r["status"] not in (0, 200)]
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    console.print(f"console: {len(rows) - len(missed)}/{len(rows)} under {TARGET:g} s at p95 on "
                  f"{counts['traces']:,} traces; slowest p95 {max(r['p95'] for r in rows):.2f} s "
                  f"({max(rows, key=lambda r: r['p95'])['page']}); missed: {', '.join(missed) or 'none'}"
                  f"{'; NOT 200: ' + ', '.join(bad) if bad else ''}; peak RSS {rss:,.0f} MB", highlight=False)
    if args.json is not None:
        args.json.write_text(json.dumps({
            "n": args.n, "traces": counts["traces"], "scores": counts["scores"],
            "drift_checks": counts["drift_checks"], "disk_bytes": size, "repeat": args.repeat,
            "generated_at": now.isoformat(), "generation_seconds": took, "peak_rss_mb": rss,
            "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "load": os.getloadavg()},
            "pages": rows}, indent=2))
    if tmp is not None:
        tmp.cleanup()


if __name__ == "__main__":
    main()
