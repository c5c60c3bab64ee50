"""Redaction on hostile text: time of the default patterns on inputs built to make a regex backtrack.

    python3 bench/redact.py [--sizes 1000,10000,100000]

A producer controls the question and the answer (up to 100,000 and 200,000 characters). A pattern whose time
grows with the square of the text lets one message hold the ingest thread for minutes. For each input shape and
size this prints the time of ``Redactor.text`` with the default patterns, and of the e-mail pattern as it was
before it started only at the start of a run (``UNANCHORED``) for comparison; times over --limit seconds are
not run for the larger sizes. Asserts nothing.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ragmon.config import IngestSettings  # noqa: E402
from ragmon.contracts.redact import Redactor  # noqa: E402

UNANCHORED = r"[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}"
SHAPES = {
    "a…a@": lambda n: "a" * n + "@",
    "a@a…a": lambda n: "a@" + "a" * n,
    "a.a.…@": lambda n: "a." * (n // 2) + "@",
    "1 1 1 … (phone-like)": lambda n: "1 " * (n // 2) + "x",
    "1(((…": lambda n: "1" + "(" * n,
    "prose with e-mails": lambda n: ("write to someone@example.com or call +1 555 0100 1234. " * (n // 56 + 1))[:n],
}


def timed(fn, text: str) -> float:
    started = time.perf_counter()
    fn(text)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,10000,100000", help="text lengths in characters")
    parser.add_argument("--limit", type=float, default=2.0, help="skip the larger sizes of a variant slower than this")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    redactor = Redactor(IngestSettings().redact_patterns, ["question"])
    unanchored = re.compile(UNANCHORED)
    table = Table(title="redaction time per text (seconds)")
    table.add_column("input")
    for n in sizes:
        table.add_column(f"defaults, {n:,} chars", justify="right")
        table.add_column(f"unanchored e-mail, {n:,}", justify="right")
    for shape, make in SHAPES.items():
        cells, slow = [], set()
        for n in sizes:
            text = make(n)
            for name, fn in (("defaults", redactor.text), ("unanchored", lambda t: unanchored.sub("X", t))):
                if name in slow:
                    cells.append("skipped")
                    continue
                seconds = timed(fn, text)
                cells.append(f"{seconds:.4f}")
                if seconds > args.limit:
                    slow.add(name)
        table.add_row(shape, *cells)
    Console(width=200).print(table)


if __name__ == "__main__":
    main()
