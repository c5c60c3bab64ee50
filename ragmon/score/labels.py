"""Where calibration pairs come from: human labels in the store or in a labelled file.

Owns reading ``review_labels`` (joined with stored ``scores``, or with ``traces`` re-judged by a judge, which
writes nothing) and parsing a labelled JSON/JSONL/CSV file into ``Pair``s. A malformed file raises
``InputError`` naming the item and the field.
"""

from __future__ import annotations

import csv
import io
import json
from collections import defaultdict
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from ragmon.errors import InputError
from ragmon.judge.calibrate import LABEL_METRICS, Pair, binarize, pairs_from_items
from ragmon.score import queries
from ragmon.score.queries import ScoreStore
from ragmon.store.trace_rows import row_to_trace


def pairs_from_store(store: ScoreStore, *, since: datetime | None = None, until: datetime | None = None,
                     fingerprint: str | None = None,
                     thresholds: Mapping[str, tuple[str, float]] = LABEL_METRICS) -> list[Pair]:
    """Human labels joined with stored judge scores (status ok), one pair per (trace, reviewer, label)."""
    labels = queries.review_labels(store, since, until)
    if not labels:
        return []
    metric_of = {label: metric for label, (metric, _) in thresholds.items()}
    scores = queries.ok_scores(store, [r["trace_id"] for r in labels], list(metric_of.values()), fingerprint)
    by_trace: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for s in scores:
        by_trace[s["trace_id"]].append(s)
    out = []
    for row in labels:
        for s in by_trace.get(row["trace_id"], []):
            for label, metric in metric_of.items():
                if s["metric"] == metric and row.get(label) is not None:
                    out.append(Pair(row["trace_id"], s["category"], label, int(row[label]),
                                    binarize(label, s["value"], thresholds), s["judge_fingerprint"],
                                    s["judge_name"], row["reviewer"], float(s["value"])))
    return out


def pairs_by_rejudging(store: ScoreStore, judge: Any, *, since: datetime | None = None, until: datetime | None = None,
                       thresholds: Mapping[str, tuple[str, float]] = LABEL_METRICS,
                       max_in_flight: int = 1) -> list[Pair]:
    """Human labels paired with a fresh verdict of ``judge`` on the labelled traces, up to ``max_in_flight``
    judge calls at once (nothing is written)."""
    labels = queries.review_labels(store, since, until)
    if not labels:
        return []
    rows = queries.traces_by_id(store, [r["trace_id"] for r in labels])
    traces = {r["trace_id"]: row_to_trace(r) for r in rows}
    items = [(traces[r["trace_id"]], {k: r.get(k) for k in thresholds}, r["reviewer"])
             for r in labels if r["trace_id"] in traces]
    return pairs_from_items(items, judge, thresholds, max_in_flight=max_in_flight)


_TRUE = {"1", "true", "yes", "y", "t"}
_FALSE = {"0", "false", "no", "n", "f"}


def load_label_file(path: Path, judge: Any = None,
                    thresholds: Mapping[str, tuple[str, float]] = LABEL_METRICS) -> list[Pair]:
    """Pairs from a labelled file. Two shapes, told apart per item:

    * judged pairs — ``trace_id, label, human, judge`` (+ optional ``category``, ``judge_fingerprint``,
      ``judge_name``): a human and a judge verdict already side by side (CSV or JSON);
    * labelled traces — ``{"trace": {trace.v1…}, "labels": {"grounded": true, …}, "reviewer": "…"}``: the
      given ``judge`` judges each trace now (JSON or JSON Lines only).
    """
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: cannot read the labels file ({exc}); pass a UTF-8 JSON, JSONL or CSV file") from None
    records = _records(path, text)
    pairs: list[Pair] = []
    traced: list[tuple[dict[str, Any], Mapping[str, Any], str]] = []
    for n, rec in enumerate(records, start=1):
        where = f"{path}: item {n}"
        if not isinstance(rec, dict):
            raise InputError(f"{where}: expected an object, got {type(rec).__name__}")
        if "trace" in rec:
            trace, labels = rec.get("trace"), rec.get("labels")
            if not isinstance(trace, dict) or not isinstance(labels, dict):
                raise InputError(f"{where}: 'trace' and 'labels' must both be objects")
            from ragmon.contracts.decode import Rejection, decode_trace

            decoded = decode_trace(json.dumps(trace).encode("utf-8"))
            if isinstance(decoded, Rejection):
                raise InputError(f"{where}: 'trace' is not a valid trace.v1 ({decoded.reason}: {decoded.detail})")
            unknown = set(labels) - set(thresholds) - {"answer_correct"}
            if unknown:
                raise InputError(f"{where}: unknown label(s) {sorted(unknown)}; known: {sorted(thresholds)}")
            parsed = {k: _flag(v, f"{where}: labels.{k}") for k, v in labels.items() if v is not None}
            traced.append((trace, parsed, str(rec.get("reviewer") or "")))
            continue
        for key in ("trace_id", "label", "human", "judge"):
            if rec.get(key) in (None, ""):
                raise InputError(f"{where}: missing '{key}' (judged pairs need trace_id, label, human, judge)")
        label = str(rec["label"])
        if label not in thresholds:
            raise InputError(f"{where}: label {label!r} is not one of {sorted(thresholds)}")
        pairs.append(Pair(str(rec["trace_id"]), str(rec.get("category") or ""), label,
                          _flag(rec["human"], f"{where}: human"), _flag(rec["judge"], f"{where}: judge"),
                          str(rec.get("judge_fingerprint") or "file"), str(rec.get("judge_name") or ""),
                          str(rec.get("reviewer") or "")))
    if traced:
        if judge is None:
            raise InputError(f"{path}: labelled traces need a judge to judge them")
        pairs.extend(pairs_from_items(traced, judge, thresholds))
    return pairs


def _records(path: Path, text: str) -> list[Any]:
    if path.suffix.lower() == ".csv":
        return list(csv.DictReader(io.StringIO(text)))
    stripped = text.strip()
    if not stripped:
        raise InputError(f"{path}: the labels file is empty")
    if stripped.startswith("["):
        try:
            return json.loads(stripped)
        except ValueError as exc:
            raise InputError(f"{path}: not valid JSON ({exc})") from None
    out = []
    for n, line in enumerate(stripped.splitlines(), start=1):
        if line.strip():
            try:
                out.append(json.loads(line))
            except ValueError as exc:
                raise InputError(f"{path}: line {n} is not valid JSON ({exc}); "
                                 "use a JSON array, JSONL or CSV") from None
    return out


def _flag(value: Any, where: str) -> int:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int) and value in (0, 1):
        return value
    if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
        return int(value.strip().lower() in _TRUE)
    raise InputError(f"{where}: expected 0/1 or true/false, got {value!r}")
