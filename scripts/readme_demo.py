"""The README's demo excerpt, made from a run of `ragmon demo` (never typed by hand).

    python3 scripts/readme_demo.py            # run the demo, rewrite the excerpt in README.md
    python3 scripts/readme_demo.py --check    # run the demo, exit 1 when the README's excerpt says otherwise

The excerpt sits between ``<!-- demo-excerpt:begin -->`` and ``<!-- demo-excerpt:end -->``. ``facts`` reads what
stays the same from run to run out of a demo's output or out of the excerpt (the number of drift tests, what
pages, the shadow pairs and verdicts, the ingest counts); z values, p-values and window sizes move with the hour
the demo runs (its traffic ends now), so they are shown but not compared. tests/integration/test_demo.py compares
the README's facts with the demo it runs.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
BEGIN, END = "<!-- demo-excerpt:begin -->", "<!-- demo-excerpt:end -->"
WIDTH = 115

_DRIFT_HEAD = re.compile(r"Drift detected \(check \w+, (?P<tests>[\d,]+) tests[^)]*\)")
_SHADOW_HEAD = re.compile(r"Shadow: (?P<cand>\S+) \(shadow\) vs (?P<base>\S+) \(production\), k=\d+, "
                          r"(?P<pairs>[\d,]+) pairs — overall verdict: (?P<verdict>[A-Z]+)")
_INGEST = re.compile(r"(?P<messages>[\d,]+) │\s+(?P<stored>[\d,]+) │ (?P<dead>[a-z_]+: \d+(?:, [a-z_]+: \d+)*)")
_STRATA = "billing|consent|returns|shipping"


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("│|").split("│")]


def demo_output(extra_env: dict[str, str] | None = None) -> str:
    """Run `ragmon demo` in a temporary directory; its combined output, or SystemExit when it fails."""
    with tempfile.TemporaryDirectory(prefix="ragmon-readme-demo-") as tmp:
        env = dict(os.environ, COLUMNS="200", **(extra_env or {}))
        proc = subprocess.run([sys.executable, "-m", "ragmon", "demo", "--dir", str(Path(tmp) / "demo")],
                              capture_output=True, text=True, env=env, timeout=1200)
    if proc.returncode != 0:
        raise SystemExit(f"ragmon demo failed (exit {proc.returncode}):\n{proc.stdout[-3000:]}{proc.stderr[-3000:]}")
    return proc.stdout + proc.stderr


def drift_rows(out: str) -> list[list[str]]:
    """The drift table's rows: retriever, variant, stratum, feature, test, verdict, then z, p, effect, n (the
    demo) or z, n (the excerpt)."""
    return [_cells(line) for line in out.splitlines()
            if re.match(r"^\s*│\s*hybrid@v\d\s+│\s+production\s+│", line) and len(_cells(line)) in (8, 10)]


def shadow_rows(out: str) -> list[list[str]]:
    """The shadow table's rows: stratum, pairs, overlap@k, verdict, why."""
    return [_cells(line) for line in out.splitlines()
            if re.match(rf"^\s*│\s*({_STRATA})\s+│\s*[\d,]+\s+│\s*[\d.]+\s+│\s*(promote|hold|reject)\s", line)]


def facts(text: str) -> dict[str, object]:
    """What a demo run and the excerpt must agree on; works on either (the excerpt keeps the same cells)."""
    head, shadow, ingest = _DRIFT_HEAD.search(text), _SHADOW_HEAD.search(text), _INGEST.search(text)
    return {
        "drift tests": head and head["tests"],
        "paging": sorted((r[2], r[3], r[4]) for r in drift_rows(text) if r[5] == "PERSISTENT"),
        "drifted strata": sorted({r[2] for r in drift_rows(text)}),
        "shadow": shadow and (shadow["cand"], shadow["base"], shadow["pairs"], shadow["verdict"]),
        "shadow verdicts": sorted((r[0], r[3]) for r in shadow_rows(text)),
        "ingest": ingest and (ingest["messages"], ingest["stored"], ingest["dead"]),
    }


def _table(rows: list[list[str]], header: list[str]) -> list[str]:
    widths = [max(len(str(c)) for c in col) for col in zip(header, *rows, strict=False)]
    return ["│ " + " │ ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)) + " │"
            for row in [header, *rows]]


def _cut(line: str) -> str:
    return line if len(line) <= WIDTH else line[:WIDTH - 2].rstrip() + " …"


def excerpt(out: str) -> str:
    """The README's excerpt of one demo run: ingest counts, the drift table, the shadow verdicts."""
    head, shadow, ingest = _DRIFT_HEAD.search(out), _SHADOW_HEAD.search(out), _INGEST.search(out)
    if not (head and shadow and ingest):
        raise SystemExit("the demo's output lacks the drift, shadow or ingest summary: has its format changed?")
    rows = drift_rows(out)
    lines = ["Ingest: messages │ stored (FINAL) │ dead-lettered",
             f"        {ingest['messages']} │ {ingest['stored']} │ {ingest['dead']}", head.group(0)]
    lines += _table([r[:7] + [r[9]] for r in rows],
                    ["retriever", "variant", "stratum", "feature", "test", "verdict", "z", "n ref/cur"])
    lines.append(shadow.group(0))
    lines += [_cut(f"│ {r[0]:<8} │ {r[1]:>5} │ {r[2]} │ {r[3]:<7} │ {r[4]}") for r in shadow_rows(out)]
    return "\n".join(lines)


def replace_excerpt(readme: str, new: str) -> str:
    start, end = readme.index(BEGIN), readme.index(END)
    return readme[:start] + f"{BEGIN}\n```\n{new}\n```\n" + readme[end:]


def readme_excerpt(readme: str | None = None) -> str:
    text = README.read_text(encoding="utf-8") if readme is None else readme
    return text[text.index(BEGIN) + len(BEGIN):text.index(END)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="compare, do not write; exit 1 when they differ")
    args = parser.parse_args()
    out = demo_output()
    if args.check:
        want, have = facts(out), facts(readme_excerpt())
        diff = {k: (have[k], want[k]) for k in want if have[k] != want[k]}
        for k, (h, w) in diff.items():
            print(f"{k}: README says {h}, the demo printed {w}")
        print("README's demo excerpt: " + ("stale; run python3 scripts/readme_demo.py" if diff else "up to date"))
        return 1 if diff else 0
    README.write_text(replace_excerpt(README.read_text(encoding="utf-8"), excerpt(out)), encoding="utf-8")
    print(f"README.md: demo excerpt rewritten ({len(excerpt(out).splitlines())} lines)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
