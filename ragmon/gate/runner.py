"""Running a retriever over a golden set: import it, call it once per answerable case, time it, score it.

The retriever is user code, called as ``f(question, k)``; it returns ranked chunk ids, ``(chunk_id, score)``
pairs, or mappings with ``chunk_id`` (and optionally ``score``), best first. Whatever it does on one case — raise,
return ``None``, a string, a list of numbers, an endless generator — is recorded for that case as an error and
the run goes on; an errored case is scored as having retrieved nothing, so a crash never improves a score.
Cases whose expected behaviour is not ``answer`` have no passage to find: they are excluded from retrieval
scoring and counted, and called only when they carry a ``tenant`` (for the permission-leak check, ``leaks.py``).
This module owns the calls and the clock; the metrics stay pure.
"""

from __future__ import annotations

import importlib
import importlib.util
import itertools
import math
import numbers
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, NamedTuple

from ragmon.contracts.golden import GoldenCase
from ragmon.contracts.trace import Behaviour
from ragmon.errors import InputError
from ragmon.gate.leaks import LeakCheck, TenantLookupError
from ragmon.metrics.permissions import LeakedChunk
from ragmon.metrics.summary import RankingScores, score_ranking
from ragmon.tracing import span

Retriever = Callable[[str, int], Any]
MAX_ERROR_CHARS = 500
MAX_ID_CHARS = 256


@dataclass(frozen=True, slots=True)
class CaseRun:
    """One golden case through the retriever: what came back, how long it took, how it scored."""

    case_id: str
    category: str
    expected_behaviour: str
    excluded: bool  # not an answerable case: not called, not scored
    ranking: tuple[str, ...] = ()
    scores: tuple[float, ...] | None = None  # when the retriever returned scores
    latency_ms: float | None = None
    error: str | None = None
    returned_more: bool = False  # the retriever returned more than it was asked for (truncated)
    metrics: RankingScores | None = None
    tenant: str = ""  # the asking user's tenant (golden case), for the permission-leak check
    leak_checked: bool = False  # the case has a tenant and its ranking was checked for other tenants' chunks
    leaks: tuple[LeakedChunk, ...] = ()


class RetrieverOutputError(ValueError):
    """The retriever returned something that is not a ranking."""


def load_retriever(spec: str, option: str = "--retriever") -> tuple[Retriever, ModuleType]:
    """Resolve ``module:function`` (or ``path/to/file.py:function``); ``InputError`` saying what is wrong.

    ``option`` names the command-line option in messages (the answerer is loaded the same way).
    """
    module_name, sep, function_name = spec.rpartition(":")
    if not sep or not module_name or not function_name:
        raise InputError(f"{option} {spec!r}: expected module:function, e.g. examples.retriever:search")
    try:
        if module_name.endswith(".py"):
            path = Path(module_name)
            if not path.is_file():
                raise InputError(f"{option} {spec!r}: no such file {path}")
            loader_spec = importlib.util.spec_from_file_location(f"_ragmon_{option.strip('-')}_{path.stem}", path)
            if loader_spec is None or loader_spec.loader is None:
                raise InputError(f"{option} {spec!r}: cannot load {path} as a Python module")
            module = importlib.util.module_from_spec(loader_spec)
            loader_spec.loader.exec_module(module)
        else:
            if "" not in sys.path and str(Path.cwd()) not in sys.path:
                sys.path.insert(0, str(Path.cwd()))  # like `python -m`: modules of the working directory import
            module = importlib.import_module(module_name)
    except InputError:
        raise
    except ModuleNotFoundError as exc:
        raise InputError(
            f"{option} {spec!r}: importing {module_name} failed: {exc}. Run from the directory that holds it "
            f"(working directory: {Path.cwd()}), install it, or pass a file: path/to/retriever.py:{function_name}"
        ) from None
    except (Exception, SystemExit) as exc:  # user code failed (or called exit()) at import: say so, with its message
        raise InputError(f"{option} {spec!r}: importing {module_name} failed: {type(exc).__name__}: {exc}") from None
    function = getattr(module, function_name, None)
    if function is None:
        raise InputError(f"{option} {spec!r}: {module_name} has no attribute {function_name!r}")
    if not callable(function):
        raise InputError(f"{option} {spec!r}: {function_name} is not callable")
    return function, module


def _item(value: object, position: int) -> tuple[str, float | None, str | None]:
    score: object = None
    tenant: object = None
    if isinstance(value, str):
        chunk = value
    elif isinstance(value, Mapping):
        chunk, score, tenant = value.get("chunk_id"), value.get("score"), value.get("tenant")
    elif isinstance(value, tuple | list) and len(value) == 2:
        chunk, score = value
    else:
        raise RetrieverOutputError(
            f"item {position} is {type(value).__name__}; expected a chunk id string or a (chunk_id, score) pair"
        )
    if not isinstance(chunk, str) or not chunk or len(chunk) > MAX_ID_CHARS:
        raise RetrieverOutputError(f"item {position}: chunk id must be a non-empty string of at most {MAX_ID_CHARS} chars")
    if score is not None:
        # numbers.Real admits NumPy scalars (FAISS returns float32), which are not Python floats
        if isinstance(score, bool) or not isinstance(score, numbers.Real) or not math.isfinite(float(score)):
            raise RetrieverOutputError(f"item {position}: score must be a finite number, got {score!r}")
        score = float(score)
    if tenant is not None and (not isinstance(tenant, str) or len(tenant) > MAX_ID_CHARS):
        raise RetrieverOutputError(f"item {position}: tenant must be a string of at most {MAX_ID_CHARS} chars")
    return chunk, score, tenant or None  # type: ignore[return-value]


def normalise_output(value: object, limit: int) -> tuple[tuple[str, ...], tuple[float, ...] | None, bool]:
    """(chunk ids, scores or None, returned more than ``limit``) from whatever the retriever returned.

    Reads at most ``limit + 1`` items, so an endless generator cannot hang the gate.
    """
    r = normalise_ranking(value, limit)
    return r.ids, r.scores, r.more


#: items of a ranking longer than asked that the permission-leak check reads (an endless generator stops here)
MAX_LEAK_SCAN = 1000


class Ranking(NamedTuple):
    """What a retriever returned: the first ``limit`` ids (scored) with their scores, whether it returned more,
    and every item read — ids and tenants as returned (None: the item carries none) — for the leak check, which
    judges the ranking before truncation."""

    ids: tuple[str, ...]
    scores: tuple[float, ...] | None
    more: bool
    read_ids: tuple[str, ...]
    read_tenants: tuple[str | None, ...]


def normalise_ranking(value: object, limit: int, *, scan: int = 0) -> Ranking:
    """:func:`normalise_output` plus every item read with its tenant: ``limit + 1`` items, or up to ``scan``
    when that is more (the leak check reads past ``limit``: a leak beyond k is still a leak)."""
    if value is None or isinstance(value, str | bytes | Mapping) or not isinstance(value, Iterable):
        raise RetrieverOutputError(f"returned {type(value).__name__}; expected a list of chunk ids or (id, score) pairs")
    read = [_item(v, i) for i, v in enumerate(itertools.islice(value, max(limit + 1, scan)))]
    more = len(read) > limit
    items = read[:limit]
    ids = tuple(c for c, _, _ in items)
    has_scores = [s is not None for _, s, _ in items]
    if any(has_scores) and not all(has_scores):
        raise RetrieverOutputError("some items carry a score and some do not; return all pairs or all ids")
    scores = tuple(s for _, s, _ in items) if items and all(has_scores) else None  # type: ignore[misc]
    if not scan:
        read = read[:limit]
    return Ranking(ids, scores, more, tuple(c for c, _, _ in read), tuple(t for _, _, t in read))


def describe(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}"
    return text if len(text) <= MAX_ERROR_CHARS else text[: MAX_ERROR_CHARS - 1] + "…"


def run_case(
    case: GoldenCase, retriever: Retriever, k: int, depth: int, clock: Callable[[], float] = time.perf_counter,
    leak_check: LeakCheck | None = None,
) -> CaseRun:
    """Call the retriever for one case and score what it returned. Answerable cases are scored; a case with a
    ``tenant`` is also checked for permission leaks (``leak_check``), answerable or not."""
    base = {"case_id": case.id, "category": case.category, "expected_behaviour": str(case.expected_behaviour),
            "tenant": case.tenant}
    answerable = case.expected_behaviour == Behaviour.answer
    check = leak_check if case.tenant else None
    if not answerable and check is None:
        return CaseRun(**base, excluded=True)
    grades = case.relevance()
    started = clock()
    try:
        # a generator does its work while it is read, so the clock stops after reading it
        returned = (retriever(case.question, depth, tenant=case.tenant) if check is not None and check.passes_tenant
                    else retriever(case.question, depth))  # type: ignore[call-arg]  # fmt: skip
        ranking = normalise_ranking(returned, depth, scan=MAX_LEAK_SCAN if check is not None else 0)
        ids, scores, more = ranking.ids, ranking.scores, ranking.more
        latency_ms = (clock() - started) * 1000.0
        # the whole ranking the retriever returned, not the part asked for: a leak past k is a leak (docs/leaks.md)
        leaks = (check.leaked(case.tenant, ranking.read_ids, check.tenants(ranking.read_ids, ranking.read_tenants))
                 if check is not None else ())
    except (Exception, SystemExit) as exc:  # user code: one bad case must not stop the run
        error = (f"retriever returned garbage: {exc}" if isinstance(exc, RetrieverOutputError)
                 else str(exc) if isinstance(exc, TenantLookupError) else describe(exc))  # fmt: skip
        if not answerable:
            return CaseRun(**base, excluded=True, error=error)
        return CaseRun(**base, excluded=False, error=error, metrics=score_ranking((), grades, k, depth))
    if not answerable:  # called for the leak check only: not scored, no latency in the report
        return CaseRun(**base, excluded=True, ranking=ids, leak_checked=True, leaks=leaks)
    return CaseRun(
        **base,
        excluded=False,
        ranking=ids,
        scores=scores,
        latency_ms=latency_ms,
        returned_more=more,
        metrics=score_ranking(ids, grades, k, depth),
        leak_checked=check is not None,
        leaks=leaks,
    )


def run_gate_cases(
    cases: Iterable[GoldenCase],
    retriever: Retriever,
    k: int,
    depth: int,
    *,
    clock: Callable[[], float] = time.perf_counter,
    on_case: Callable[[CaseRun], None] | None = None,
    leak_check: LeakCheck | None = None,
) -> list[CaseRun]:
    """Every case through :func:`run_case`, in file order; ``on_case`` is told after each (progress bars)."""
    runs = []
    with span("ragmon.gate.run", {"ragmon.gate.k": k, "ragmon.gate.depth": depth}) as current:
        for case in cases:
            run = run_case(case, retriever, k, depth, clock, leak_check)
            runs.append(run)
            if on_case is not None:
                on_case(run)
        current.set_attribute("ragmon.gate.cases", len(runs))
    return runs
