"""The applications of ``tests/support/conventions_app.py`` run as processes, and the checks of what ragmon stored
from their spans against what they saw: shared by the interop tests of the other conventions
(``tests/integration/test_otlp_conventions.py``) and their slow and late-span variants
(``test_otlp_conventions_slow.py``). Test plumbing and the field-by-field comparison; nothing else.
"""

from __future__ import annotations

import hashlib
import json
import math
import subprocess
import sys
import threading
from datetime import timedelta
from typing import Any

import pytest

from ragmon.store import ClickHouseStore
from tests.integration.ingest_support import ROOT, wait_for

#: per application: the conventions its rows were read by, and the fields its instrumentation does not carry
#: (LlamaIndex's model calls are GenAI spans of OpenLLMetry's OpenAI instrumentation; LangChain's chat-model spans
#: carry traceloop.* attributes too)
EXPECTED = {
    ("openllmetry", "VectorIndexRetriever.task"): ("genai,openllmetry", ""),
    ("openllmetry", "vector_db_retrieve VectorStoreRetriever"): ("openllmetry", "chunk_id,score"),
    ("genai", "retrieval kb"): ("genai", "text"),
    ("haystack", "InMemoryBM25Retriever.run"): ("openinference", ""),
    ("dspy", "ColBERTv2.__call__"): ("openinference", "tokens"),
    # the agent run is read by Pydantic AI's own attributes, its model and tool calls are plain GenAI spans
    ("pydantic_ai", "execute_tool search_docs"): ("genai,pydantic_ai", ""),
}
FAMILIES = ("openllmetry", "genai", "haystack", "dspy", "pydantic_ai")
#: the same, OpenLLMetry's two frameworks in processes of their own (``--single``: each has one slow query)
SINGLE_FAMILIES = ("openllmetry_llamaindex", "openllmetry_langchain", "genai", "haystack", "dspy", "pydantic_ai")


class App:
    """One family's application, running (``python -m tests.support.conventions_app``): its output lines are read
    as they come, so a test can wait for one (``{"asked": …}``, ``{"holding": N}``) while it runs."""

    def __init__(self, endpoints: list[str], token: str, family: str, *options: str) -> None:
        self.family = family
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.support.conventions_app", ",".join(endpoints), token, family, *options],
            cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.lines: list[dict[str, Any]] = []
        self._stderr: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self._errors = threading.Thread(target=lambda: self._stderr.extend(self.process.stderr or []), daemon=True)
        self._errors.start()

    def _read(self) -> None:
        for line in self.process.stdout or []:
            if line.startswith("{"):
                self.lines.append(json.loads(line))

    def said(self, key: str) -> list[Any]:
        """The values of the output lines that have ``key``, so far."""
        return [x[key] for x in list(self.lines) if key in x]

    def log(self) -> str:
        return "".join(self._stderr)[-4000:]

    def send_line(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write("go\n")
        self.process.stdin.flush()

    def finish(self, timeout: float) -> tuple[list[dict[str, Any]], dict[str, int]]:
        """Wait for the application to end: what it sent (one ``Sent`` per query) and the skips it expects."""
        try:
            code = self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"{self.family} did not finish within {timeout} s:\n{self.log()}") from None
        self._reader.join(30)
        self._errors.join(30)
        assert code == 0, f"{self.family} exited with {code}:\n{self.log()}"
        [skipped] = self.said("skipped")
        return [x for x in self.lines if "source" in x], skipped

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(30)


def run_apps(endpoints: list[str], token: str, families: tuple[str, ...] = FAMILIES, *options: str,
             timeout: float = 300) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """Every family at once, each in its own process; what they sent and the skips expected of them all."""
    apps = [App(endpoints, token, family, *options) for family in families]
    try:
        return gather(apps, timeout)
    finally:
        for app in apps:
            app.kill()


def gather(apps: list[App], timeout: float) -> tuple[list[dict[str, Any]], dict[str, int]]:
    sent: list[dict[str, Any]] = []
    skipped = {"embedding_only": 0, "llm_only": 0, "no_retriever": 0}
    for app in apps:
        queries, skips = app.finish(timeout)
        sent += queries
        for reason, n in skips.items():
            skipped[reason] += n
    return sent, skipped


def rows(store: ClickHouseStore) -> list[dict[str, Any]]:
    return store.query_rows(f"SELECT *, session_id, top1_score FROM {store.table('traces')} FINAL")


def compare(rows: list[dict[str, Any]], sent: list[dict[str, Any]], *, answer_seconds: float = 0.0,
            version: str | None = None, expected: dict[tuple[str, str], tuple[str, str]] = EXPECTED) -> None:
    """Every query stored once, each row field by field what its application saw, read by the conventions and
    missing the fields ``expected`` says (a row of each); with ``answer_seconds``, the model took that long over the
    answer (the root's latency covers it, the retriever's does not); with ``version``, each row is that version of a
    repaired trace (``ragmon.otlp.version``)."""
    assert len(rows) == len(sent), f"{len(rows)} rows for {len(sent)} queries"
    by_question = {r["question"]: r for r in rows}
    seen: set[tuple[str, str]] = set()
    assert len(by_question) == len(rows)
    for s in sent:
        row = by_question[s["question"]]
        where = f"{s['source']}: {s['question']!r}"
        conventions, unavailable = expected[(s["source"], row["retriever_name"])]
        ids = s["chunk_ids"]
        if "chunk_id" in unavailable:  # not carried: ragmon's id from the content, never a position
            ids = ["sha256:" + hashlib.sha256(t.encode()).hexdigest()[:32] for t in s["texts"]]
        assert row["answer"] == s["answer"], where
        assert row["retrieved_chunk_ids"] == ids, where
        assert [None if math.isnan(x) else x for x in row["retrieved_scores"]] == pytest.approx(s["scores"]), where
        assert row["retrieved_texts"] == (s["texts"] or [""] * len(ids)), where
        assert row["retrieved_ranks"] == list(range(1, len(ids) + 1)), where
        assert row["context_chunk_ids"] == s["context"], where
        assert (row["tokens_prompt"], row["tokens_completion"], row["model_name"]) == \
            (s["prompt_tokens"], s["completion_tokens"], s["model"]), where
        assert row["query_id"] == row["trace_id"], where
        if s["session_id"]:  # Pydantic AI's conversation id (gen_ai.conversation.id)
            assert row["session_id"] == s["session_id"], where
        attributes = row["attributes"]
        assert attributes["ragmon.otlp.conventions"] == conventions, where
        assert attributes.get("ragmon.otlp.unavailable", "") == unavailable, where
        assert "ragmon.otlp.incomplete" not in attributes, where
        assert attributes.get("ragmon.otlp.version") == version, where
        assert {"total", "retrieve", "generate"} <= set(row["latency_ms"]) and row["latency_total_ms"] > 0, where
        if answer_seconds:
            assert row["latency_ms"]["total"] >= answer_seconds * 1000 > row["latency_ms"]["retrieve"], \
                f"{where}: the root ended {answer_seconds} s after the retriever"
            ended = row["ts"] + timedelta(milliseconds=row["latency_total_ms"])
            assert row["ingested_at"] >= ended, f"{where}: written after the query ended"
        if s["source"] not in ("genai", "dspy"):  # their documents carry no metadata
            assert all(row["retrieved_doc_ids"]), where
        seen.add((s["source"], row["retriever_name"]))
    assert seen == set(expected), "a row of every instrumentation"


def skips(metric: Any, skipped: dict[str, int]) -> dict[str, float]:
    return {r: metric("ragmon_ingest_otlp_traces_skipped_total", {"reason": r}) or 0 for r in skipped}


def wait_for_rows(store: ClickHouseStore, n: int, timeout: float, log: Any = lambda: "", *,
                  done: Any = lambda: True) -> None:
    """Until ``n`` rows are stored and ``done()``; on a timeout, what was stored and ``log()``."""
    try:
        wait_for(lambda: len(rows(store)) >= n and done(), timeout, f"{n} queries stored")
    except AssertionError as exc:
        stored = [(r["question"], r["retriever_name"], r["attributes"]) for r in rows(store)]
        raise AssertionError(f"{exc}; stored {stored}\n{log()}") from None
