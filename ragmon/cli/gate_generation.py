"""``ragmon gate --answerer``: the command-line glue of generation gating.

Builds the judge from settings exactly as the live scorer does (``ragmon.judge.make_judge(settings.judge)``,
with ``--judge`` overriding only ``judge.kind``), loads the answerer and the retriever module's ``chunk_text``,
and phrases the per-case notes and the judge line. The work itself is in ``ragmon.gate.generation``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from types import ModuleType
from typing import Any

from ragmon.config import Settings, override
from ragmon.contracts.golden import GoldenCase
from ragmon.errors import ConfigError
from ragmon.gate.answerer import Answerer, ChunkText, chunk_text_function
from ragmon.gate.generation import GenerationRun, GenerationSetup, generate_cases
from ragmon.gate.generation_report import GenerationResult, GenerationThresholds, build_generation_result
from ragmon.gate.runner import CaseRun, Retriever, load_retriever
from ragmon.judge import Judge, make_judge


@dataclass(frozen=True, slots=True)
class PreparedGeneration:
    answerer: Answerer
    chunk_text: ChunkText
    judge: Judge
    judge_kind: str
    max_in_flight: int = 1


def prepare_generation(settings: Settings, answerer_spec: str, judge_kind: str | None, retriever_spec: str,
                       retriever_module: ModuleType) -> PreparedGeneration:  # fmt: skip
    """Everything generation needs, checked before any case runs (``InputError``/``ConfigError`` otherwise)."""
    answerer, _ = load_retriever(answerer_spec, "--answerer")
    chunk_text = chunk_text_function(retriever_module, retriever_spec)
    judge_settings = override(settings, "judge", kind=judge_kind).judge
    try:
        judge = make_judge(judge_settings)
    except ConfigError:
        raise
    except Exception as exc:  # noqa: BLE001 - a judge that cannot be built is a configuration problem
        raise ConfigError([f"judge ({judge_settings.kind}): {type(exc).__name__}: {exc}"]) from None
    return PreparedGeneration(answerer, chunk_text, judge, judge_settings.kind, judge_settings.max_in_flight)


def run_generation(prep: PreparedGeneration, cases: Sequence[GoldenCase], runs: Sequence[CaseRun],
                   retriever: Retriever, k: int, depth: int, retriever_spec: str, corpus_snapshot: str,
                   on_case: Callable[[GenerationRun], None] | None = None) -> list[GenerationRun]:  # fmt: skip
    setup = GenerationSetup(retriever=retriever, answerer=prep.answerer, chunk_text=prep.chunk_text,
                            judge=prep.judge, k=k, depth=depth, retriever_name=retriever_spec,
                            corpus_snapshot=corpus_snapshot, now=datetime.now(UTC))  # fmt: skip
    return generate_cases(cases, runs, setup, on_case=on_case, max_in_flight=prep.max_in_flight)


def generation_result(prep: PreparedGeneration, runs: Sequence[GenerationRun],
                      thresholds: GenerationThresholds) -> GenerationResult:  # fmt: skip
    return build_generation_result(runs, thresholds, prep.judge.name, prep.judge.model, prep.judge.fingerprint)


def generation_notes(section: dict[str, Any]) -> list[str]:
    queries = section["queries"]
    notes = []
    if failed := sum(1 for q in queries.values() if q["error"]):
        gated = any(v is not None for v in section["report"]["thresholds"].values())
        notes.append(f"generation: {failed} of {len(queries)} cases were not scored ("
                     + ("their strata fail: generation_errors)" if gated else "no generation threshold is set, so "
                        "this does not fail the run; pass one, e.g. --min-faithfulness, to gate on it)"))  # fmt: skip
    not_judged = [case_id for case_id, q in queries.items() if (q["error"] or "").startswith("not judged:")]
    if not_judged:
        notes.append(f"{len(not_judged)} case(s) from {not_judged[0]!r} on: {queries[not_judged[0]]['error']}")
    if wrong := [case_id for case_id, q in queries.items() if q["refusal_outcome"] == "wrong_decline"]:
        notes.append(f"{len(wrong)} case(s) declined, but not as the golden set expects (e.g. refused where it "
                     "should route or clarify; counted as wrong_declines, not missed refusals): "
                     f"{', '.join(wrong[:10])}")  # fmt: skip
    for case_id, q in queries.items():
        if q["error"] and case_id not in not_judged:
            notes.append(f"case {case_id!r}: generation: {q['error']} (not scored)")
        elif q["refusal_cause"] in ("empty_shortlist", "irrelevant_shortlist", "low_score_shortlist"):
            notes.append(f"case {case_id!r}: declined an answerable question with no relevant chunk in its context "
                         f"({q['refusal_cause']}): a retrieval failure with good manners")  # fmt: skip
    return notes


def judge_line(section: dict[str, Any]) -> str:
    judge = section["judge"]
    usage = [q["judge_usage"] for q in section["queries"].values()]
    cost = sum(u["cost_usd"] for u in usage)
    tokens = sum(u["prompt_tokens"] + u["completion_tokens"] for u in usage)
    model = f" model {judge['model']}," if judge["model"] else ""
    return (f"judge: {judge['name']},{model} fingerprint {judge['fingerprint']} (the same judge and fingerprint "
            f"`ragmon score` uses with these settings); judge tokens {tokens:,}, cost ${cost:.4f}")  # fmt: skip
