"""The release gate on a larger golden set: wall time of the whole `ragmon gate` command, and its artifact size.

    python3 bench/gate.py [--repeat 48] [--rounds 3]

Builds a golden set from ``examples/golden/dev.json`` with every case repeated ``--repeat`` times under new ids
(21 cases × 48 = 1,008), then runs `ragmon gate` as a user would (a subprocess, BM25 example retriever,
``--k 3``) twice: retrieval only, and with ``--answerer examples.answerer:answer`` and the heuristic judge.
Prints the best wall time of ``--rounds`` runs of each, the time per case, and the size of the run artifact
written to ``--out``. Exit codes of the gate itself (0 or 1) are expected; anything else is reported. Asserts
nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]
GATE = [sys.executable, "-c", "from ragmon.cli.app import main; main()", "gate"]
console = Console()


def golden_set(repeat: int, path: Path) -> int:
    source = json.loads((ROOT / "examples/golden/dev.json").read_text())
    cases = [{**case, "id": f"{case['id']}-r{r}"} for r in range(repeat) for case in source["cases"]]
    path.write_text(json.dumps({**source, "cases": cases}))
    return len(cases)


def run_gate(golden: Path, out: Path, extra: list[str]) -> float:
    started = time.perf_counter()
    done = subprocess.run([*GATE, str(golden), "--retriever", "examples.retriever:search", "--k", "3",
                           "--min-coverage", "0.5", "--min-mrr", "0.5", "--no-progress", "--format", "json", "--out",
                           str(out), *extra],
                          cwd=ROOT, capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    elapsed = time.perf_counter() - started
    if done.returncode not in (0, 1):
        raise SystemExit(f"ragmon gate exited {done.returncode}:\n{done.stderr[-2000:]}")
    return elapsed


def artifact_bytes(out: Path) -> int:
    return sum(p.stat().st_size for p in out.rglob("*") if p.is_file())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=48, help="copies of each example case (default 48: 1,008 cases)")
    parser.add_argument("--rounds", type=int, default=3, help="runs of each variant; the best is reported")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="ragmon-bench-gate-") as tmp:
        golden = Path(tmp) / "golden.json"
        n = golden_set(args.repeat, golden)
        variants = {"retrieval only": [],
                    "with --answerer (heuristic judge)": ["--answerer", "examples.answerer:answer"]}
        for name, extra in variants.items():
            times, size = [], 0
            for i in range(args.rounds):
                out = Path(tmp) / f"out-{len(rows)}-{i}"
                times.append(run_gate(golden, out, extra))
                size = artifact_bytes(out)
            rows.append((name, min(times), size))
    table = Table(title=f"ragmon gate on {n:,} cases (best of {args.rounds}; {os.cpu_count()} CPUs, "
                        f"{platform.python_implementation()} {platform.python_version()})")
    for column in ("run", "wall time", "per case", "artifact"):
        table.add_column(column, justify="left" if column == "run" else "right")
    for name, best, size in rows:
        table.add_row(name, f"{best:.2f} s", f"{best / n * 1000:.2f} ms", f"{size / 1e6:.1f} MB")
    console.print(table)
    console.print("Wall time includes starting Python and importing ragmon (a few hundred ms).")


if __name__ == "__main__":
    main()
