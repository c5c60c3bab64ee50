"""The queries a reviewer should look at: the largest per-query gains and losses of one quality metric, with the
question and both top-k lists side by side — or, when nothing was judged, the largest ranking disagreements.

The ranking metric is ``rank_by`` if given, else nDCG@k on canary queries, else the judge metric with the most
judged pairs (one fingerprint: the one with the most pairs). Question text and chunk ids are untrusted and are
passed through as data; the report escapes them.
"""

from __future__ import annotations

from typing import Any

from ragmon.shadow import quality
from ragmon.shadow.queries import ShadowStore, pair_lists
from ragmon.shadow.result import Example, Examples


def _candidates(judged: quality.JudgedPairs, canaries: dict[str, dict[str, Any]]
                ) -> dict[str, dict[str, tuple[str, float, float]]]:
    """metric → {query_id: (stratum, baseline, candidate)}; judge metrics keep their most-used fingerprint."""
    out: dict[str, dict[str, tuple[str, float, float]]] = {}
    for item_id, item in canaries.items():
        for metric, (b, c) in item["metrics"].items():
            out.setdefault(metric, {})[item_id] = (item["stratum"], b, c)
    per_fp: dict[tuple[str, str], dict[str, tuple[str, float, float]]] = {}
    for (stratum, metric, fp), values in judged.values.items():
        bucket = per_fp.setdefault((metric, fp), {})
        for q, (b, c) in values.items():
            bucket[q] = (stratum, b, c)
    best: dict[str, tuple[int, str]] = {}
    for (metric, fp), bucket in per_fp.items():
        if metric not in out and (metric not in best or len(bucket) > best[metric][0]):
            best[metric] = (len(bucket), fp)
    for metric, (_, fp) in best.items():
        out[metric] = per_fp[(metric, fp)]
    return out


def pick_examples(store: ShadowStore, params: dict[str, Any], judged: quality.JudgedPairs,
                  canaries: dict[str, dict[str, Any]], lowest_rbo: list[tuple[float, str]], opts: Any, k: int,
                  notices: list[str]) -> Examples:
    """``lowest_rbo``: (rbo, query_id) of the least-agreeing pairs, from the summary aggregation."""
    rank_by, top = opts.rank_by, opts.top
    if top <= 0:
        return Examples("none", "")
    options = _candidates(judged, canaries)
    metric = rank_by
    if metric is not None and metric not in options:
        notices.append(f"--rank-by {metric!r} has no paired values (available: {', '.join(sorted(options)) or 'none'})")
        metric = None
    if metric is None and options:
        metric = "ndcg_at_k" if "ndcg_at_k" in options else max(options, key=lambda m: (len(options[m]), m))
    if metric is None:
        return _disagreements(store, params, lowest_rbo[:top], k)
    values = options[metric]
    ranked = sorted(values.items(), key=lambda kv: (kv[1][2] - kv[1][1], kv[0]))
    losses = [kv for kv in ranked[:top] if kv[1][2] - kv[1][1] < 0]
    gains = [kv for kv in reversed(ranked[-top:]) if kv[1][2] - kv[1][1] > 0]
    ids = [q for q, _ in losses + gains]
    details = pair_lists(store, params, ids, k)

    def build(items: list[tuple[str, tuple[str, float, float]]]) -> tuple[Example, ...]:
        out = []
        for q, (stratum, b, c) in items:
            d = details.get(q)
            if d is None:
                continue
            relevant = canaries[q]["relevant"] if q in canaries else ()
            out.append(Example(q, stratum, d["question"], metric, b, c, d["b"], d["c"], relevant))  # type: ignore[arg-type]
        return tuple(out)

    return Examples("quality", metric, gains=build(gains), losses=build(losses))


def _disagreements(store: ShadowStore, params: dict[str, Any], lowest: list[tuple[float, str]], k: int) -> Examples:
    details = pair_lists(store, params, [q for _, q in lowest], k)
    shown = tuple(Example(q, details[q]["stratum"], details[q]["question"], "rbo", 1.0, rbo, details[q]["b"],
                          details[q]["c"]) for rbo, q in lowest if q in details)
    return Examples("disagreement", "rbo", losses=shown) if shown else Examples("none", "")
