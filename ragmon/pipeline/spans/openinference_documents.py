"""The documents of an OpenInference retriever or reranker span, as trace.v1 chunks in rank order.

Owns chunk ids — ``document.id``, else the id in the span's JSON output (LangChain records ``Document.id`` only
there), else ``sha256:`` of the content; never a position, so one chunk has one id in every trace — and reading
``doc_id``/``doc_version`` (and the chunk's ``tenant``) from the document metadata. A score the span does not carry
stays None (never invented). Raises ``ValueError`` for an id of the wrong type or a document with neither id nor
content. No I/O.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import msgspec

from ragmon.pipeline.spans.otlp import Span

_DOC_ID_KEYS = ("doc_id", "document_id", "ref_doc_id", "source")
_DOC_VERSION_KEYS = ("doc_version", "version")
#: the chunk's owning tenant, for the permission-leak count (docs/leaks.md)
_TENANT_KEYS = ("tenant", "tenant_id")
_LABEL_MAX = 256
#: how a chunk id made from the chunk's content begins (the span carried no id for it)
DERIVED_ID = "sha256:"
_decode = msgspec.json.Decoder().decode


def has_documents(span: Span, prefix: str, *, identified: bool = False) -> bool:
    """The span has documents (``identified``: whose first carries an id or a score)."""
    attrs = span.attributes
    fields = ("id", "score") if identified else ("id", "content", "score", "metadata")
    return any(f"{prefix}0.document.{field}" in attrs for field in fields)


def documents(span: Span, prefix: str) -> list[dict[str, Any]]:
    """The span's documents in rank order. A chunk id is ``document.id``, else the id in the span's JSON output
    (LangChain records ``Document.id`` only there), else ``sha256:`` of the content: the same chunk gets the same
    id in every trace, and two chunks never share one by position."""
    docs: dict[int, dict[str, Any]] = {}
    for k, value in span.attributes.items():
        if k.startswith(prefix):
            index, _, field = k[len(prefix):].partition(".")
            if index.isdigit():
                docs.setdefault(int(index), {})[field] = value
    output_ids = _output_ids(span) if any("document.id" not in d for d in docs.values()) else []
    out = []
    for rank, i in enumerate(sorted(docs), start=1):
        d = docs[i]
        where = f"{prefix}{i}"
        content = d.get("document.content")
        if "document.id" in d:
            chunk_id = _scalar_text(d["document.id"], f"{where}.document.id")
        elif i < len(output_ids) and output_ids[i][1] == content and output_ids[i][0]:
            chunk_id = output_ids[i][0]
        elif isinstance(content, str):
            chunk_id = DERIVED_ID + hashlib.sha256(content.encode()).hexdigest()[:32]
        else:
            raise ValueError(f"{where} has neither document.id nor document.content: no chunk id to give it")
        meta = d.get("document.metadata")
        if isinstance(meta, str):
            try:
                meta = _decode(meta)  # msgspec: ~3x json.loads, and this runs per document
            except (msgspec.DecodeError, RecursionError):
                meta = None
        meta = meta if isinstance(meta, dict) else {}
        chunk = {"chunk_id": chunk_id, "rank": rank, "doc_id": _label(meta, _DOC_ID_KEYS),
                 "doc_version": _label(meta, _DOC_VERSION_KEYS), "score": d.get("document.score")}
        if isinstance(content, str):
            chunk["text"] = content
        if tenant := _label(meta, _TENANT_KEYS):
            chunk["tenant"] = tenant
        out.append(chunk)
    return out


def _output_ids(span: Span) -> list[tuple[str, Any]]:
    """(id, content) of each document in the span's JSON output, e.g. LangChain's ``{"documents": [{"id", …}]}``."""
    value = span.attributes.get("output.value")
    if not isinstance(value, str) or not value.lstrip().startswith(("{", "[")):
        return []
    try:
        doc = json.loads(value)
    except ValueError:
        return []
    items = doc.get("documents") if isinstance(doc, dict) else doc
    if not isinstance(items, list):
        return []
    out = []
    for item in items:
        item = item if isinstance(item, dict) else {}
        ident = item.get("id")
        out.append((ident if isinstance(ident, str) and 0 < len(ident) <= _LABEL_MAX else "",
                    item.get("page_content", item.get("text"))))
    return out


def _label(meta: dict[str, Any], keys: tuple[str, ...]) -> str:
    for k in keys:
        v = meta.get(k)
        if v is None:
            continue
        if type(v) is int:  # noqa: E721 - not bool
            v = str(v)
        if type(v) is str and len(v) <= _LABEL_MAX:  # noqa: E721
            return v
    return ""


def _scalar_text(value: Any, key: str) -> str:
    """An id attribute as text: strings and integers only (an array's Python repr is not an id)."""
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise ValueError(f"{key} is {value!r}; expected a string")
    return str(value)
