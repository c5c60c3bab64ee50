"""The Gate runs page's content: the run artifacts in ``console.gate_runs_dir`` (what ``ragmon gate --out``
writes), one run's per-stratum table, and the per-query gains and losses between two runs.

Owns finding and summarising artifacts. A run is named by its file name only, checked against the artifact naming
(``run-<sha256>.json``), so a request can never read another path. Reading and diffing are the gate's own
(``load_artifact``, ``compare_runs``: the same as ``ragmon gate --compare``); runs over different golden sets are
diffed on the cases both share, with a warning. Must not write or delete an artifact.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ragmon.errors import InputError
from ragmon.gate.artifact import load_artifact
from ragmon.gate.compare import Comparison, compare_runs

RUN_NAME = re.compile(r"run-[0-9a-f]{64}\.json")
#: the newest runs listed, and the gains and losses shown between two
MAX_RUNS = 200
TOP = 20
STRATUM_COLUMNS = ("n_cases", "n_scored", "n_excluded", "n_errors", "coverage_at_k", "hit_at_k", "mrr_at_k",
                   "ndcg_at_k", "recall_at_depth", "latency_p50_ms", "latency_p95_ms")


@dataclass(frozen=True)
class RunSummary:
    name: str
    created_at: str
    golden: str
    retriever: str
    k: Any
    passed: bool | None
    problem: str = ""


def list_runs(directory: Path) -> list[RunSummary]:
    """The newest ``MAX_RUNS`` artifacts, newest first; an unreadable one is listed with its problem."""
    if not directory.is_dir():
        return []
    paths = sorted((p for p in directory.glob("run-*.json") if RUN_NAME.fullmatch(p.name)),
                   key=lambda p: p.stat().st_mtime, reverse=True)[:MAX_RUNS]
    out = []
    for path in paths:
        try:
            a = load_artifact(path)
        except InputError as exc:
            out.append(RunSummary(path.name, "", "", "", "", None, str(exc)))
            continue
        out.append(summary(path.name, a))
    return sorted(out, key=lambda r: r.created_at, reverse=True)


def summary(name: str, a: dict[str, Any]) -> RunSummary:
    g, p = a.get("golden") or {}, a.get("parameters") or {}
    report = a.get("report") if isinstance(a.get("report"), dict) else {}
    return RunSummary(name, str(a.get("created_at", "")),
                      f"{g.get('name', '?')} {g.get('version', '?')} "
                      f"({g.get('set', '?')}, {g.get('cases', '?')} cases)",
                      str(p.get("retriever", "?")), p.get("k", "?"), report.get("passed"))


def load_run(directory: Path, name: str) -> dict[str, Any]:
    """The artifact ``name`` in ``directory``; ``InputError`` for a name that is not a run's, or a missing run."""
    if not RUN_NAME.fullmatch(name):
        raise InputError("run: expected an artifact file name run-<sha256>.json")
    return load_artifact(directory / name)


def strata(artifact: dict[str, Any]) -> list[dict[str, Any]]:
    rows = (artifact.get("report") or {}).get("strata") or []
    return [r for r in rows if isinstance(r, dict)]


def compare(directory: Path, baseline: str, current: str) -> Comparison:
    """Per-query gains and losses of ``current`` over ``baseline`` (different golden sets allowed: shared cases)."""
    return compare_runs(load_run(directory, current), load_run(directory, baseline), allow_different_golden=True,
                        top=TOP)
