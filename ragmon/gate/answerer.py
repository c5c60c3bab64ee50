"""The answerer seam of ``ragmon gate --answerer``: what user generation code is given, and what it may return.

The answerer is user code, called as ``f(question, chunks)``. ``chunks`` is a list of :class:`Passage` named
tuples ``(chunk_id, text)``: the top ``--k`` chunks the gate's retriever returned for the question, best first,
with the text the retriever module's ``chunk_text(chunk_id)`` gave for each. It returns a mapping or an object
with ``answer`` (str), ``citations`` (a list of ``{sentence, chunk_id, quote}``, default none), ``behaviour``
(answer | refuse | clarify | route, default answer) and ``context`` (the chunk ids it actually used, a subset of
those it was given; default all of them); a bare string is an answer without citations. Anything else is an
:class:`AnswererOutputError` naming what is wrong. This module validates shapes only: it does not call the
answerer, read a clock or judge anything.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from types import ModuleType
from typing import Any, NamedTuple

from ragmon.contracts.trace import Behaviour
from ragmon.errors import InputError

#: the function a retriever module exposes so the gate can hand chunk texts to the answerer and the judge
CHUNK_TEXT_FUNCTION = "chunk_text"
FIELDS = ("answer", "citations", "behaviour", "context")
MAX_ID_CHARS = 256
MAX_CITATIONS = 1000  # trace.v1's limit

Answerer = Callable[[str, list["Passage"]], Any]
ChunkText = Callable[[str], Any]


class Passage(NamedTuple):
    """One chunk handed to the answerer: unpack it as ``chunk_id, text`` or read the attributes."""

    chunk_id: str
    text: str


@dataclass(frozen=True, slots=True)
class Generated:
    """An answerer's output, checked: what goes into the trace the judge reads."""

    answer: str
    behaviour: str
    citations: tuple[dict[str, Any], ...]
    context: tuple[str, ...]


class AnswererOutputError(ValueError):
    """The answerer returned something that is not an answer (the message says what and where)."""


def chunk_text_function(module: ModuleType, retriever_spec: str) -> ChunkText:
    """The retriever module's ``chunk_text``; ``InputError`` saying how to provide it when it is missing."""
    function = getattr(module, CHUNK_TEXT_FUNCTION, None)
    if not callable(function):
        raise InputError(
            f"--answerer needs chunk texts, but the retriever module of {retriever_spec!r} has no callable "
            f"{CHUNK_TEXT_FUNCTION}(chunk_id): define one next to the retriever function that returns the chunk's "
            "text (str) for an id it can return (see examples/retriever.py)"
        )
    return function


def _field(value: Any, name: str) -> Any:
    return value.get(name) if isinstance(value, Mapping) else getattr(value, name, None)


def _citation(value: Any, position: int) -> dict[str, Any]:
    where = f"citations[{position}]"
    if isinstance(value, str | bytes) or value is None:
        raise AnswererOutputError(f"{where} is {type(value).__name__}; expected {{sentence, chunk_id, quote}}")
    if isinstance(value, Mapping) and (unknown := sorted(set(map(str, value)) - {"sentence", "chunk_id", "quote"})):
        raise AnswererOutputError(f"{where} has unknown keys {unknown}; expected sentence, chunk_id, quote")
    sentence, chunk_id, quote = (_field(value, n) for n in ("sentence", "chunk_id", "quote"))
    if isinstance(sentence, bool) or not isinstance(sentence, numbers.Integral) or sentence < 0:
        raise AnswererOutputError(f"{where}.sentence must be a 0-based answer sentence index, got {sentence!r}")
    if not isinstance(chunk_id, str) or not chunk_id or len(chunk_id) > MAX_ID_CHARS:
        raise AnswererOutputError(f"{where}.chunk_id must be a non-empty string of at most {MAX_ID_CHARS} chars")
    if quote is not None and not isinstance(quote, str):
        raise AnswererOutputError(f"{where}.quote must be a string or absent, got {type(quote).__name__}")
    return {"sentence": int(sentence), "chunk_id": chunk_id, "quote": quote}


def _sequence(value: Any, name: str) -> list[Any]:
    if value is None:
        return []
    if isinstance(value, str | bytes | Mapping) or not isinstance(value, Iterable):
        raise AnswererOutputError(f"{name} is {type(value).__name__}; expected a list")
    items = []
    for item in value:  # bounded: an endless generator is cut at the trace's limit
        items.append(item)
        if len(items) > MAX_CITATIONS:
            raise AnswererOutputError(f"{name} has more than {MAX_CITATIONS} items")
    return items


def normalise_answer(value: Any, given: tuple[str, ...]) -> Generated:
    """Check what the answerer returned; ``given`` are the chunk ids it was handed."""
    if isinstance(value, str):
        return Generated(value, Behaviour.answer.value, (), given)
    if value is None or isinstance(value, bytes | int | float | list | tuple | set):
        raise AnswererOutputError(f"returned {type(value).__name__}; expected a mapping or object with 'answer'")
    if isinstance(value, Mapping) and (unknown := sorted(set(map(str, value)) - set(FIELDS))):
        raise AnswererOutputError(f"unknown keys {unknown}; expected {', '.join(FIELDS)}")
    answer = _field(value, "answer")
    if not isinstance(answer, str):
        raise AnswererOutputError(f"'answer' must be a string, got {type(answer).__name__}")
    behaviour = _field(value, "behaviour")
    behaviour = Behaviour.answer.value if behaviour is None else behaviour
    if not isinstance(behaviour, str) or behaviour not in {b.value for b in Behaviour}:
        raise AnswererOutputError(f"'behaviour' must be one of answer, refuse, clarify, route; got {behaviour!r}")
    citations = tuple(_citation(c, i) for i, c in enumerate(_sequence(_field(value, "citations"), "citations")))
    context = _field(value, "context")
    if context is None:
        used = given
    else:
        used = tuple(_sequence(context, "context"))
        strangers = [c for c in used if not isinstance(c, str) or c not in given]
        if strangers:
            raise AnswererOutputError(f"'context' names chunks it was not given: {strangers[:5]!r}")
        used = tuple(dict.fromkeys(used))
    return Generated(answer, str(behaviour), citations, used)
