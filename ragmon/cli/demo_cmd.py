"""``ragmon demo``: generate two days of RAG traffic with a known incident, run it through ragmon, and show
what ragmon found. No external services: the store is the embedded ClickHouse engine on local disk."""

from __future__ import annotations

import logging
import secrets
import shutil
from pathlib import Path
from typing import Annotated, Any

import typer
from pydantic import SecretStr
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from ragmon.cli.common import console, err_console, exit_if_stuck, fail, settings_of
from ragmon.config import override

STAGES = ("generate", "ingest", "score", "drift", "review", "shadow", "coverage", "ab", "triage", "judge")


def demo(
    ctx: typer.Context,
    data_dir: Annotated[Path, typer.Option(
        "--dir", help="Embedded ClickHouse data directory for the demo (wiped at the start of each run).")
    ] = Path(".ragmon/demo"),
    queries: Annotated[int, typer.Option(min=400, max=200_000,
                                         help="Production queries to generate over two days (each may have a "
                                              "shadow twin).")] = 12_000,
    sample_rate: Annotated[float, typer.Option(min=0.01, max=1.0,
                                               help="Share of traffic scored by the judge (by hash of query_id).")
                           ] = 0.5,
    seed: Annotated[int, typer.Option(help="Seed of the generated traffic.")] = 7,
    keep_serving: Annotated[bool, typer.Option(
        "--keep-serving", help="Afterwards keep the review UI, the console and /metrics up until Ctrl-C (a demo "
                               "reviewer account is created; its password and every address are printed).")] = False,
    host: Annotated[str, typer.Option(help="Bind address with --keep-serving.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=0, max=65535,
                                      help="HTTP port with --keep-serving (0 picks a free one).")] = 9108,
) -> None:
    """Run ragmon end to end on generated traffic, with no external services.

    It generates two days of traffic for a production retriever (hybrid@v1) and a shadow candidate
    (hybrid@v2) across four strata, injects a retrieval-score drift and a faithfulness drop in one stratum for
    the last six hours, two permission leaks, a question type the golden set lacks, a canary cohort that
    reformulates more, and a burst of thumbs-down on the incident's answers, plus six thin past weeks of
    traffic. Then it runs the real stages: decode, redact, batch and store (with a few malformed messages
    dead-lettered), deterministic sampling and the heuristic judge, a drift check, the weekly review selection,
    the shadow comparison, the leak listing, question-type coverage, the A/B comparison, the thumbs-down triage
    queue, and judge drift: SIMULATED reviewers label the past weeks' review samples (agreeing less with the
    judge in one stratum in the last week) and the judge-agreement job compares each week with the calibrated
    kappa. It ends with what each stage found next to what was injected, and where the review UI and /metrics
    are.
    """
    from ragmon.demo.run import demo_settings, run_demo
    from ragmon.demo.scenario import Scenario
    from ragmon.store import ClickHouseStore
    from ragmon.telemetry import Telemetry

    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    settings = demo_settings(settings_of(ctx), sample_rate)
    if data_dir.exists():
        if not data_dir.is_dir():
            raise fail(f"--dir {data_dir} is a file, not a directory; choose a directory for the demo's data")
        if not (data_dir / "metadata").is_dir() and any(data_dir.iterdir()):
            raise fail(f"--dir {data_dir} exists and is not an embedded ClickHouse directory; choose another")
        shutil.rmtree(data_dir)
    store_settings = settings.store.model_copy(update={"dsn": SecretStr(f"chdb://{data_dir.resolve()}"),
                                                       "database": "ragmon_demo"})
    settings = settings.model_copy(update={"store": store_settings})
    store = ClickHouseStore.open(settings.store)
    telemetry = Telemetry()
    scenario = Scenario(n_queries=queries, seed=seed)

    columns = (TextColumn("{task.description:<9}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=err_console, transient=False) as bar:
        tasks = {stage: bar.add_task(stage, total=None) for stage in STAGES}

        def progress(stage: str, done: int, total: int) -> None:
            bar.update(tasks[stage], completed=done, total=total)

        result = run_demo(settings, store, telemetry, scenario, progress=progress,
                          golden_path=data_dir / GOLDEN_FILE, dead_letter_path=data_dir / DEAD_LETTER_FILE)

    from ragmon.demo.summary import print_summary

    print_summary(console, result, data_dir, data_dir / GOLDEN_FILE)
    if keep_serving:
        _serve(settings, store, telemetry, host, port, data_dir / DEAD_LETTER_FILE)


#: the golden set the demo's coverage step compares with traffic, written into the demo's directory
GOLDEN_FILE = "golden-coverage.json"
#: the messages the demo dead-lettered (JSON Lines), which the console's Dead letters page reads
DEAD_LETTER_FILE = "dead-letters.jsonl"


def _serve(settings: Any, store: Any, telemetry: Any, host: str, port: int, dead_letters: Path) -> None:
    """Keep the review UI (with a demo reviewer) and /metrics up until Ctrl-C, through the process assembler."""
    from ragmon.config import ReviewSettings, ReviewUser
    from ragmon.process import Process, serve_roles
    from ragmon.review.auth import hash_password

    password = secrets.token_urlsafe(12)
    review = ReviewSettings(users=[ReviewUser(username="demo", password_hash=SecretStr(hash_password(password)))],
                            session_secret=SecretStr(secrets.token_hex(32)))
    settings = override(settings.model_copy(update={"review": review}), "server", host=host, port=port)
    # the demo's dead letters are in its file; no broker runs for it, so the page never waits for one
    settings = override(settings, "console", dead_letter_file=dead_letters, read_dead_letter_topic=False)

    def announce(process: Process) -> None:
        process.service("review").refresh_gauges()  # the queue's progress on /metrics from the first scrape
        base = f"http://{host}:{process.port}"
        table = Table.grid(padding=(0, 2))
        table.add_row("review UI", f"{base}/review/  (user [bold]demo[/], password [bold]{password}[/])")
        table.add_row("console", f"{base}/review/console/  (on-call's pages: traces, drift, shadow, dead letters; "
                                 "sign in as above)")
        table.add_row("metrics", f"{base}/metrics")
        console.print(table)
        console.print("serving until Ctrl-C")

    exit_if_stuck(serve_roles(settings, only=["review"], store=store, telemetry=telemetry,
                              options={"review": {"select": False}}, title="ragmon demo", started=announce))
