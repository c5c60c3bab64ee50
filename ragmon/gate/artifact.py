"""The gate's run artifact: an immutable, content-addressed JSON record of one run.

It holds everything needed to reproduce and argue about the run: code revision (git commit and whether the tree
was dirty), ragmon version, golden-set name, version, content hash and which set (dev or release), corpus
snapshots (those the golden cases were adjudicated against, and the retriever's own if it declares one),
parameters and thresholds, per-query rankings, metrics, latencies, errors and permission leaks (chunk id and
tenant), the per-stratum report, and the leak record with the name of whoever approved leaks (``--allow-leaks``).
A run with ``--answerer`` adds a ``generation`` section (judge identity, report) and per query the scored trace.

The file name is ``run-<sha256 of the content>.json``: the same content always lands in the same name and a
different run never overwrites another. Files are created exclusively and made read-only.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from datetime import datetime
from pathlib import Path
from types import ModuleType
from typing import Any

from ragmon import __version__
from ragmon.errors import InputError
from ragmon.gate.generation import GenerationRun
from ragmon.gate.generation_report import GenerationResult
from ragmon.gate.report import GateResult
from ragmon.gate.runner import CaseRun
from ragmon.golden_files import GoldenFile

SCHEMA = "ragmon-gate-run.v1"
RETRIEVER_SNAPSHOT_ATTRIBUTES = ("CORPUS_SNAPSHOT", "corpus_snapshot")


def code_revision(cwd: Path) -> dict[str, Any]:
    """The git commit of ``cwd`` and whether its tree has uncommitted changes (None when not a git checkout)."""

    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=10, check=False)
        except (OSError, subprocess.SubprocessError):
            return None
        return done.stdout.strip() if done.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    status = git("status", "--porcelain", "--untracked-files=no") if commit else None
    return {"git_commit": commit, "git_dirty": bool(status) if status is not None else None,
            "ragmon_version": __version__}


def retriever_snapshot(module: ModuleType) -> str | None:
    """The corpus snapshot a retriever module declares (``CORPUS_SNAPSHOT``), if any."""
    for name in RETRIEVER_SNAPSHOT_ATTRIBUTES:
        value = getattr(module, name, None)
        if isinstance(value, str) and value:
            return value
    return None


def _query(run: CaseRun) -> dict[str, Any]:
    return {
        "case_id": run.case_id,
        "category": run.category,
        "expected_behaviour": run.expected_behaviour,
        "excluded": run.excluded,
        "ranking": list(run.ranking),
        "scores": list(run.scores) if run.scores is not None else None,
        "latency_ms": run.latency_ms,
        "error": run.error,
        "returned_more_than_asked": run.returned_more,
        "metrics": run.metrics.as_dict() if run.metrics is not None else None,
        "tenant": run.tenant,
        "permission_leaks": [{"chunk_id": c.chunk_id, "tenant": c.tenant} for c in run.leaks],
    }


def build_artifact(
    *,
    golden: GoldenFile,
    set_name: str,
    runs: list[CaseRun],
    result: GateResult,
    retriever_spec: str,
    retriever_corpus: str | None,
    revision: dict[str, Any],
    created_at: datetime,
    generation: dict[str, Any] | None = None,
    leaks: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The artifact's content (plain JSON data). ``generation``: the ``generation`` section of an --answerer run
    (see :func:`generation_section`); without it the artifact is exactly the retrieval-only one. ``leaks``: the
    permission-leak record (``gate.leaks.leak_section``: cases checked, leaks per stratum, who approved them)."""
    content = {
        "schema": SCHEMA,
        "created_at": created_at.isoformat(),
        "code": revision,
        "golden": {
            "path": golden.path,
            "name": golden.name,
            "version": golden.version,
            "sha256": golden.sha256,
            "set": set_name,
            "cases": len(golden.cases),
        },
        "corpus_snapshots": {
            "golden": sorted({c.corpus_snapshot for c in golden.cases if c.corpus_snapshot}),
            "retriever": retriever_corpus,
        },
        "parameters": {"retriever": retriever_spec, "k": result.k, "depth": result.depth},
        "report": result.as_dict(),
        "queries": [_query(r) for r in runs],
    }
    if leaks is not None:
        content["leaks"] = leaks
    if generation is not None:
        content["parameters"] = {**content["parameters"], **generation["parameters"]}
        content["generation"] = {"judge": generation["judge"], "report": generation["report"]}
        per_case = generation["queries"]
        for query in content["queries"]:
            query["generation"] = per_case.get(query["case_id"])
    return content


def generation_section(answerer_spec: str, judge_kind: str, report: GenerationResult,
                       runs: list[GenerationRun]) -> dict[str, Any]:  # fmt: skip
    """What an --answerer run adds: parameters, the judge's identity, the report, and per case its trace."""

    def query(r: GenerationRun) -> dict[str, Any]:
        usage = r.usage
        return {"behaviour": r.behaviour, "refusal_outcome": r.outcome, "refusal_cause": r.refusal_cause,
                "live_scores": r.values, "generate_ms": r.generate_ms, "error": r.error, "trace": r.trace,
                "judge_usage": {"prompt_tokens": usage.prompt_tokens, "completion_tokens": usage.completion_tokens,
                                "cost_usd": usage.cost_usd, "cached": usage.cached}}  # fmt: skip

    return {
        "parameters": {"answerer": answerer_spec, "judge": judge_kind},
        "judge": {"name": report.judge_name, "model": report.judge_model, "fingerprint": report.judge_fingerprint},
        "report": report.as_dict(),
        "queries": {r.case_id: query(r) for r in runs},
    }


def write_artifact(artifact: dict[str, Any], out_dir: Path) -> Path:
    """Write ``artifact`` as ``out_dir/run-<sha256>.json`` (read-only); return the path.

    Writing the same content twice returns the existing file; a different file under that name (it cannot be
    ours) is an error rather than an overwrite.
    """
    text = json.dumps(artifact, indent=2, sort_keys=True, ensure_ascii=False, allow_nan=False) + "\n"
    data = text.encode()
    digest = hashlib.sha256(data).hexdigest()
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"--out {out_dir}: cannot create the artifact directory: {exc.strerror}") from None
    path = out_dir / f"run-{digest}.json"
    try:
        with open(path, "xb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
    except FileExistsError:
        if hashlib.sha256(path.read_bytes()).hexdigest() != digest:
            raise InputError(f"{path}: exists with different content; artifacts are never overwritten") from None
        return path
    except OSError as exc:
        raise InputError(f"--out {out_dir}: cannot write the run artifact: {exc.strerror}") from None
    path.chmod(0o444)
    return path


def load_artifact(path: Path) -> dict[str, Any]:
    """Read a run artifact for ``--compare``; ``InputError`` when it is missing, not JSON or not an artifact."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(f"--compare {path}: no such run artifact") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"--compare {path}: not a readable JSON run artifact ({exc})") from None
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        raise InputError(f"--compare {path}: not a ragmon gate run artifact (expected schema {SCHEMA})")
    golden = data.get("golden")
    queries = data.get("queries")
    if not isinstance(golden, dict) or not isinstance(queries, list) or not all(isinstance(q, dict) for q in queries):
        raise InputError(f"--compare {path}: artifact is missing its golden or queries section")
    return data


def earlier_runs(out_dir: Path, golden_sha256: str, set_name: str) -> int:
    """How many artifacts in ``out_dir`` ran this exact golden set as ``set_name`` (unreadable files skipped)."""
    count = 0
    if not out_dir.is_dir():
        return 0
    for path in out_dir.glob("run-*.json"):
        try:
            golden = json.loads(path.read_text(encoding="utf-8")).get("golden", {})
        except (OSError, ValueError, AttributeError):
            continue
        if isinstance(golden, dict) and golden.get("sha256") == golden_sha256 and golden.get("set") == set_name:
            count += 1
    return count
