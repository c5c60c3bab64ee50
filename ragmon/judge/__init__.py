"""Judges: the ``Judge`` contract, the deterministic ``HeuristicJudge``, the pinned ``OpenAIJudge``.

``make_judge`` builds the judge the ``judge`` config section pins; the gate and the live scorer both get
their judge from it, so offline and online scores carry the same fingerprint.
"""

from __future__ import annotations

from typing import Any

from ragmon.judge.base import Judge, JudgeInput, Judgement, Usage, fingerprint
from ragmon.judge.heuristic import HeuristicJudge

__all__ = ["HeuristicJudge", "Judge", "JudgeInput", "Judgement", "Usage", "fingerprint", "make_judge"]


def make_judge(settings: Any, telemetry: Any = None) -> Judge:
    """The judge named by ``settings`` (a ``JudgeSettings``)."""
    if settings.kind == "heuristic":
        return HeuristicJudge(chunk_cache_entries=settings.heuristic_chunk_cache_entries)
    from ragmon.judge.openai import OpenAIJudge

    return OpenAIJudge.from_settings(settings, telemetry=telemetry)
