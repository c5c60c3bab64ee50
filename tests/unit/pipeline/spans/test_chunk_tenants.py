"""Chunk tenants from OTLP: an OpenInference document's ``tenant`` metadata is the chunk's tenant, so permission
leaks are counted on traces from instrumented applications too (docs/leaks.md)."""

from __future__ import annotations

from ragmon.pipeline.spans.openinference_documents import documents
from ragmon.pipeline.spans.otlp import Span


def test_an_openinference_documents_tenant_metadata_becomes_the_chunks_tenant() -> None:
    p = "retrieval.documents."
    span = Span("0" * 32, "1" * 16, "", "retrieve", 0, 1, {
        f"{p}0.document.id": "a", f"{p}0.document.metadata": '{"tenant": "globex", "doc_id": "d"}',
        f"{p}1.document.id": "b", f"{p}1.document.metadata": {"tenant_id": 7},
        f"{p}2.document.id": "c"}, "")
    assert [d.get("tenant") for d in documents(span, p)] == ["globex", "7", None]
