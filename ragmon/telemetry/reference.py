"""``docs/metrics.md``, every metric of the catalogue by owner (and where each owner's set is registered), rendered
from the catalogue: ``python3 -m ragmon.telemetry.reference`` prints it, ``--write`` writes it, ``--check`` exits 1
when the file differs (CI's unit test does the same). Owns the page's layout only."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ragmon.telemetry.catalogue import CATALOGUE, SNAPSHOTS, MetricDef

DOC = Path(__file__).resolve().parents[2] / "docs" / "metrics.md"
#: the Prometheus type of each kind, and the series names it exposes
_TYPE = {"counter": "counter", "gauge": "gauge", "histogram": "histogram", "info": "info", "series": "gauge"}
_OWNERS = {
    "process": "every process (`ragmon.process`), whatever its roles",
    "ingest": "the trace loop (`ragmon.pipeline`), in a process running the `ingest` or `otlp` role (one set for both "
              "loops: the `loop` label tells them apart where it matters), and in `ragmon ingest --file` and the demo; "
              "its `ragmon_ingest_otlp_*` series count traces assembled from OTLP spans, read from the traces topic or "
              "taken by the OTLP/HTTP receiver (docs/otlp.md)",
    "outcomes": "the `outcomes` role and `ragmon ingest --outcomes`: user outcome events (docs/ab.md)",
    "otlp": "the `otlp` role: its OTLP/HTTP receiver on `/v1/traces` (docs/otlp.md)",
    "store": "the embedded store's disk and parts, in every process on the embedded store (docs/operations.md, "
             "\"The disk\"); a ClickHouse server has none",
    "review": "the `review` role: sign-in and the weekly queue (docs/review.md)",
    "judge": "the judge, in a process that scores: the `score` role, `ragmon score` and the demo (docs/judges.md)",
    "score": "the `score` role and `ragmon score`: live scoring (docs/judges.md)",
    "drift": "the `drift` role: checks and looks (docs/drift.md)",
    "judge_agreement": "the `judge_agreement` role: judge agreement with human labels (docs/review.md)",
    "coverage": "the `coverage` role: golden-set coverage of live traffic (docs/coverage.md)",
    "shadow": "the `shadow` role: shadow comparisons (docs/shadow.md)",
}

_INTRO = """Every `ragmon_*` series a ragmon process can expose on `/metrics`, by the part that moves it (its owner).
Generated from the catalogue (`ragmon/telemetry/catalogue.py`) by `python3 -m ragmon.telemetry.reference --write`;
a unit test fails when this page and the catalogue differ. Each owner's metrics are one set, declared next to the
code that moves them (`ragmon/<part>/metrics.py`) and registered when that code is built: a process exposes the
`process` set and the sets of the parts it runs, where each section below says, and no others (a process running
only `drift` has no `ragmon_ingest_*` series). A registered metric shows zero, or no series, until it moves. Gauges
marked *snapshot* are replaced as a whole at each check or look: a series the last one did not name is gone."""


def _series(spec: MetricDef) -> str:
    name = spec.name
    if spec.kind == "counter" and not name.endswith("_total"):
        name += "_total"
    if spec.kind == "info":
        name += "_info"
    labels = ", ".join(spec.labels)
    return f"`{name}{{{labels}}}`" if labels else f"`{name}`"


def render() -> str:
    snapshot_of = {m: attr for attr, members in SNAPSHOTS.items() for m in members}
    lines = ["# Metrics", "", _INTRO, ""]
    for owner, title in _OWNERS.items():
        specs = [s for s in CATALOGUE if s.owner == owner]
        if not specs:
            continue
        lines += [f"## {owner}", "", f"{title[0].upper()}{title[1:]}.", "", "| series | type | meaning |",
                  "| --- | --- | --- |"]
        for s in specs:
            kind = _TYPE[s.kind] + (" (snapshot)" if s.attr in snapshot_of else "")
            text = s.help.replace("|", "\\|")
            lines.append(f"| {_series(s)} | {kind} | {text} |")
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help=f"write {DOC.relative_to(DOC.parents[1])}")
    parser.add_argument("--check", action="store_true", help="exit 1 when the file differs from the catalogue")
    args = parser.parse_args(argv)
    text = render()
    if args.write:
        DOC.write_text(text, encoding="utf-8")
    elif args.check:
        if not DOC.exists() or DOC.read_text(encoding="utf-8") != text:
            print(f"{DOC}: out of date; run python3 -m ragmon.telemetry.reference --write", file=sys.stderr)
            return 1
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
