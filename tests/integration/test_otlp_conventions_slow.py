"""Issue 34, item 2: the slow query and the late span, for every instrumentation besides OpenInference's LlamaIndex
and LangChain ones (OpenLLMetry's LlamaIndex and LangChain, the GenAI conventions of openai-v2 and util-genai,
Pydantic AI's, OpenInference's Haystack and DSPy), against the real parts.

The REAL instrumentations on the small applications of ``tests/support/conventions_app.py`` (``--single``: one
query per framework, each framework in its own process, all at once), talking to a local OpenAI-compatible server;
the SDK's REAL ``BatchSpanProcessor`` and OTLP/HTTP exporter, one per path, send each span when it ends. The paths,
as in ``test_otlp_slow.py``: the REAL OpenTelemetry Collector (docs/otlp.md's configuration) → the real Kafka
broker → ragmon's ingest loop; and ragmon's own ``POST /v1/traces``; each writing into its own database of the real
chDB store, every ``ingest.otlp_*`` setting at its default unless a test says otherwise.

- the slow query: the model takes 121 s over each final answer (``--answer-delay``): the early spans wait on both
  paths, nothing is stored, then every query is stored whole, field by field;
- the late span: each query's answering model call is held back until its trace was stored (``--hold-answer``):
  within ``ingest.otlp_repair_window_seconds`` (its default, 60 s) the trace is repaired, its next version whole;
  on a receiver whose window has closed, the span is dead-lettered (``otlp_late_spans``) and counted.
"""

from __future__ import annotations

import copy
import json
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ragmon.config import Settings
from ragmon.process import Process, build_process
from ragmon.store import ClickHouseStore
from tests.integration.ingest_support import Running, kafka_settings, wait_for
from tests.support.collector import Collector, collector_binary, doc_config
from tests.support.conventions_rows import SINGLE_FAMILIES, App, compare, gather, rows, skips, wait_for_rows

#: how long the model thinks over each final answer
ANSWER_SECONDS = 121
#: the repair window of the receiver that sees the held spans too late
SHORT_WINDOW_SECONDS = 1


def receiver(store: ClickHouseStore, tmp_path: Path, name: str, **ingest: Any) -> Process:
    """The otlp role in this process, on a free port, writing into ``store``; no token."""
    settings = Settings(server={"port": 0}, store=store.settings, ingest=ingest,
                        otlp={"port": 0, "dead_letters": str(tmp_path / f"{name}-dead.jsonl"),
                              "spool_dir": str(tmp_path / f"{name}-spool")})
    process = build_process(settings, ["otlp"], store=store)
    process.serve()
    process.daemon.start()
    return process


@dataclass
class Route:
    """One way in: where applications send, the database it writes into, what it counted, how many traces are
    assembling, its log; ``process``: the otlp role, for a route straight to ``/v1/traces``."""

    name: str
    endpoint: str
    store: ClickHouseStore
    metric: Any
    pending: Any
    log: Any = lambda: ""
    process: Process | None = None


def second_store(stack: ExitStack, store_settings: Any, suffix: str) -> ClickHouseStore:
    other = ClickHouseStore.open(store_settings.model_copy(update={"database": store_settings.database + suffix}))
    stack.callback(other.command, f"DROP DATABASE IF EXISTS {other.settings.database}")
    return other


def http_route(stack: ExitStack, store: ClickHouseStore, tmp_path: Path, name: str, **ingest: Any) -> Route:
    """ragmon's ``/v1/traces`` (the otlp role) into ``store``."""
    process = receiver(store, tmp_path, name, **ingest)
    stack.callback(process.stop_server)
    stack.callback(process.daemon.stop)
    registry = process.telemetry.registry
    return Route(name, f"http://127.0.0.1:{process.listener_port('otlp')}/v1/traces", store,
                 lambda metric, labels=None: registry.get_sample_value(metric, labels or {}) or 0.0,
                 process.service("otlp").intake.pending, process=process)


def both_routes(stack: ExitStack, store: ClickHouseStore, store_settings: Any, kafka_bootstrap: str, topic: str,
                tmp_path: Path) -> tuple[Route, Route]:
    """The Collector (docs/otlp.md's configuration, its kafka exporter to ``topic``) → ragmon's ingest loop into
    ``store``; ragmon's ``/v1/traces`` into a second database; both with the default ``ingest.otlp_*`` settings."""
    config = copy.deepcopy(doc_config())
    config["exporters"]["kafka"]["brokers"] = [kafka_bootstrap]
    config["exporters"]["kafka"]["traces"]["topic"] = topic
    kafka = Running(store, kafka_settings(kafka_bootstrap, topic, f"g-{topic}"))
    stack.callback(kafka.close)
    collector = stack.enter_context(Collector(collector_binary(), config, tmp_path))
    through = Route("collector → kafka", collector.otlp_http, store, kafka.metric, kafka.pipeline.intake.pending,
                    collector.log)
    return through, http_route(stack, second_store(stack, store_settings, "_h"), tmp_path, "http")


def start_apps(stack: ExitStack, routes: list[Route], *options: str) -> list[App]:
    """Every framework's application at once, one query each, exporting to every route."""
    apps = [App([r.endpoint for r in routes], "", family, "--single", *options) for family in SINGLE_FAMILIES]
    for app in apps:
        stack.callback(app.kill)
    return apps


def wait_for_all(apps: list[App], key: str, timeout: float) -> None:
    """Until every application said ``key`` (or ended: then it fails, with its log)."""
    wait_for(lambda: all(app.said(key) or app.process.poll() is not None for app in apps), timeout,
             f"every application to say {key!r}")
    for app in apps:
        assert app.said(key), f"{app.family} never said {key!r}:\n{app.log()}"


def counted(route: Route, n: int, skipped: dict[str, int]) -> None:
    """Each of the ``n`` queries counted once and stored; nothing skipped, nothing left without its root."""
    metric, where = route.metric, route.name
    assert metric("ragmon_ingest_traces_consumed_total", {"kind": "otlp_trace"}) == n, where
    assert metric("ragmon_ingest_traces_settled_total", {"kind": "otlp_trace", "outcome": "stored"}) == n, where
    assert metric("ragmon_ingest_traces_settled_total", {"kind": "otlp_trace", "outcome": "dead_lettered"}) == 0, where
    assert metric("ragmon_ingest_otlp_incomplete_traces_total", {"outcome": "timed_out_no_root"}) == 0, where
    assert metric("ragmon_ingest_otlp_incomplete_traces_total", {"outcome": "timed_out_emitted"}) == 0, where
    assert skips(metric, skipped) == skipped == {"embedding_only": 0, "llm_only": 0, "no_retriever": 0}, where
    assert metric("ragmon_ingest_otlp_unscored_documents_total") == 2, f"{where}: LangChain's two documents"


def dead_letters(route: Route, reason: str) -> float:
    return route.metric("ragmon_ingest_dead_letters_total", {"reason": reason})


@pytest.mark.slow
@pytest.mark.kafka
@pytest.mark.collector
def test_every_instrumentation_answering_two_minutes_after_its_retrieval_is_stored_whole_on_both_paths(
        store, store_settings, kafka_bootstrap, new_topic, tmp_path):
    with ExitStack() as stack:
        routes = both_routes(stack, store, store_settings, kafka_bootstrap, new_topic(1), tmp_path)
        apps = start_apps(stack, list(routes), "--answer-delay", str(ANSWER_SECONDS))
        n = len(apps)  # one query each
        wait_for_all(apps, "asked", 180)
        # every query's early spans (retriever, embedding, Pydantic AI's tool-call step…) wait on both paths
        for route in routes:
            wait_for(lambda r=route: r.pending() == n, 60, f"the early spans on {route.name}:\n{route.log()}")
        assert all(rows(r.store) == [] for r in routes), "nothing is stored while the models think"
        assert not any(app.said("source") for app in apps), "no model had answered yet: the check above held"
        sent, skipped = gather(apps, ANSWER_SECONDS + 120)
        assert len(sent) == n
        for route in routes:
            wait_for_rows(route.store, n, 60, route.log)
            compare(rows(route.store), sent, answer_seconds=ANSWER_SECONDS)
            counted(route, n, skipped)
            assert all(dead_letters(route, r) == 0 for r in ("otlp_no_root", "otlp_late_spans")), route.name
            assert route.pending() == 0
    assert not (tmp_path / "http-dead.jsonl").exists() or (tmp_path / "http-dead.jsonl").read_text() == ""


@pytest.mark.slow
@pytest.mark.kafka
@pytest.mark.collector
def test_an_answer_span_that_comes_after_its_trace_was_stored_repairs_it_in_the_window_and_is_dead_lettered_after(
        store, store_settings, kafka_bootstrap, new_topic, tmp_path):
    """Each query's answering model call is held back by the application until its trace was stored without it:
    through the Collector and straight in (repair window 60 s, the default) the trace is repaired, its version 2
    the whole query; on a receiver whose window (1 s) has closed, the span is dead-lettered and counted."""
    with ExitStack() as stack:
        repairing = both_routes(stack, store, store_settings, kafka_bootstrap, new_topic(1), tmp_path)
        late = http_route(stack, second_store(stack, store_settings, "_late"), tmp_path, "late",
                          otlp_repair_window_seconds=SHORT_WINDOW_SECONDS)
        routes = [*repairing, late]
        apps = start_apps(stack, routes, "--hold-answer")
        n = len(apps)
        wait_for_all(apps, "holding", 180)
        assert all(app.said("holding") == [1] for app in apps), "one answer held back per query"
        for route in routes:  # stored without the answer's model call
            wait_for_rows(route.store, n, 60, route.log)
            for row in rows(route.store):
                attributes = row["attributes"]
                assert "ragmon.otlp.version" not in attributes, route.name
                # Pydantic AI's run has its tool-call step's model call: complete, with that call's tokens only
                assert attributes.get("ragmon.otlp.missing") == "llm" or (
                    row["retriever_name"], row["tokens_prompt"]) == ("execute_tool search_docs", 77), row
        # the short window has closed: that receiver keeps no stored trace's spans for repairs any more (ragmon
        # exposes no count of them: the assembler's own)
        assert late.process is not None
        assembler = late.process.service("otlp").intake._assembler
        wait_for(lambda: assembler.emitted_bytes() == 0, 30, "the short repair window to close")
        for app in apps:
            app.send_line()
        sent, skipped = gather(apps, 120)
        for route in repairing:
            wait_for(lambda r=route: r.metric("ragmon_ingest_otlp_repaired_traces_total") == n, 60,
                     f"{n} traces repaired on {route.name}:\n{route.log()}")
            compare(rows(route.store), sent, version="2")
            counted(route, n, skipped)
            assert all(dead_letters(route, r) == 0 for r in ("otlp_no_root", "otlp_late_spans")), route.name
        wait_for(lambda: dead_letters(late, "otlp_late_spans") == n, 60, "the late spans dead-lettered")
        letters = [json.loads(line) for line in (tmp_path / "late-dead.jsonl").read_text().splitlines()]
        assert [x["reason"] for x in letters] == ["otlp_late_spans"] * n
        assert all(f"ingest.otlp_repair_window_seconds, {SHORT_WINDOW_SECONDS} s" in x["detail"] for x in letters)
        for letter in letters:  # each the held span alone: a model call
            [span] = json.loads(letter["value"])
            assert span["attributes"]["openinference.span.kind"] == "LLM", span
        assert {json.loads(x["value"])[0]["trace_id"] for x in letters} == {r["trace_id"] for r in rows(late.store)}
        assert late.metric("ragmon_ingest_otlp_incomplete_traces_total", {"outcome": "late_spans"}) == n
        assert late.metric("ragmon_ingest_otlp_repaired_traces_total") == 0
        assert all("ragmon.otlp.version" not in r["attributes"] for r in rows(late.store)), "the first version stays"
        counted(late, n, skipped)
