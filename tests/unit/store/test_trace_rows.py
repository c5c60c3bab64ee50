"""Reading a ``traces`` row back as a trace (``row_to_trace``) when its parallel arrays are not parallel: a row
written by SQL or a simulator rather than by ingest must still read back (the console's trace page shows it), by one
stated rule, into a valid trace."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ragmon.contracts import Trace, decode_trace
from ragmon.store.trace_rows import TraceColumns, row_to_trace
from tests.conftest import make_trace

CITATIONS = [{"sentence": 0, "chunk_id": "policy@c1", "quote": "first"},
             {"sentence": 2, "chunk_id": "policy@c2", "quote": "second"},
             {"sentence": 3, "chunk_id": "policy@c3", "quote": None}]


def stored_row(**overrides: Any) -> dict[str, Any]:
    """The row ingest would write for a trace with ``CITATIONS``, then ``overrides`` (column: value)."""
    batch = TraceColumns()
    batch.add(decode_trace(json.dumps(make_trace(citations=CITATIONS)).encode()).trace)
    row = {name: values[0] for name, values in batch.columns.items()}
    return {**row, **overrides}


def citations(row: dict[str, Any]) -> list[dict[str, Any]]:
    trace = row_to_trace(row)
    Trace.model_validate(trace)
    return trace["citations"]


def test_a_row_ingest_wrote_reads_back_every_citation():
    assert citations(stored_row()) == CITATIONS


@pytest.mark.parametrize("column", ["citation_sentences", "citation_chunk_ids"])
def test_a_citation_without_its_sentence_or_chunk_id_is_left_out(column: str):
    """Both say what the citation is; without either there is nothing to show, so the citations are as many as the
    shorter of the two arrays."""
    short = {"citation_sentences": [0, 2], "citation_chunk_ids": ["policy@c1", "policy@c2"]}[column]
    assert citations(stored_row(**{column: short})) == CITATIONS[:2]
    assert citations(stored_row(**{column: []})) == []


def test_a_missing_quote_reads_as_no_quote_and_an_extra_one_is_ignored():
    assert citations(stored_row(citation_quotes=["first"])) == [
        CITATIONS[0], {**CITATIONS[1], "quote": None}, CITATIONS[2]]
    assert citations(stored_row(citation_quotes=["first", "second", "", "stray"])) == CITATIONS
