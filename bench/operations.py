"""The whole daemon under operations for tens of minutes (issue 30): the long version of tests/system.

    python3 bench/operations.py --minutes 30          # the run quoted in the README
    python3 bench/operations.py --minutes 5           # a short one (one shortened cycle of faults)
    python3 bench/operations.py --minutes 60 --workdir /var/tmp/ops --json ops.json

``ragmon run`` with every role on a broker of its own and the embedded store, under the traffic, people and
faults of ``tests/support/operations`` (the harness the CI test uses) in cycles of about six minutes: each cycle
has the judge answering 429 then 500 for 30 s, a SIGTERM and restart, a ``kill -9`` and restart, a broker
restart, 30 s of a full store disk, and on each OTLP path (the real Collector into Kafka; straight to
``/v1/traces``) three queries whose LLM call lasts about two minutes among queries of 0.1–30 s. At the end it
drains, stops the daemon, reads the store with FINAL and checks the invariants.

Prints progress lines, then the faults with their recovery times, the daemon's lifetimes and the invariants as a
table, and ONE summary line last. Exit status 0 when every invariant held, 1 otherwise. Needs Java (the broker),
the Collector (``scripts/otel-collector build``) and root for the store's tmpfs (``mount``). Cleans up every
process it started, also on Ctrl-C or SIGTERM; the work directory (logs, the journals of what was sent) is kept.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.operations.scenario import Unavailable, long_plan, run_scenario, summary_line  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=30.0, help="minutes of traffic (default 30; at least 4)")
    parser.add_argument("--workdir", type=Path, default=None, help="where to run (default: a new temporary directory)")
    parser.add_argument("--json", type=Path, default=None, help="also write the summary as JSON here")
    args = parser.parse_args()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="ragmon-operations-"))

    def stop(signum: int, frame: object) -> None:
        raise SystemExit(f"stopped by signal {signum}; cleaning up")

    signal.signal(signal.SIGTERM, stop)
    plan = long_plan(args.minutes)
    try:
        outcome = run_scenario(plan, workdir, say=lambda line: print(line, flush=True))
    except Unavailable as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(outcome.report, flush=True)
    if args.json is not None:
        args.json.write_text(json.dumps(outcome.summary, indent=2) + "\n", encoding="utf-8")
    print(summary_line(outcome), flush=True)
    return 0 if outcome.ok else 1


if __name__ == "__main__":
    sys.exit(main())
