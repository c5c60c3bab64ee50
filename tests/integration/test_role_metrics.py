"""Each role registers its own metrics: a process built by ``ragmon.process`` on the real chDB store (and the real
broker for the Kafka roles) exposes on ``/metrics`` the ``process`` and embedded ``store`` sets and the sets of the
parts its roles run, and no others. A drift process has no ``ragmon_ingest_*`` series, an ingest process no
``ragmon_drift_*`` ones. Read from a real scrape of the process's HTTP port: the owners of the families it shows."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from ragmon.config import Settings, StoreSettings
from ragmon.contracts.golden import GoldenCase
from ragmon.golden_files import write_golden
from ragmon.process import Process, build_process
from ragmon.review.auth import token_digest
from ragmon.telemetry import CATALOGUE

#: the owner of each family as a scrape names it: a counter's name with and without ``_total``, its ``_created``,
#: an info's ``_info``
OWNER = {name: s.owner for s in CATALOGUE for base in (s.name.removesuffix("_total"),)
         for name in (s.name, base, f"{base}_created", f"{s.name}_info")}
#: what every process on the embedded store exposes
ALWAYS = {"process", "store"}


def exposed_owners(process: Process) -> set[str]:
    """Serve the process's port, scrape /metrics once, stop serving: the owners of the ``ragmon_*`` families shown."""
    process.serve()
    try:
        text = httpx.get(f"http://127.0.0.1:{process.port}/metrics", timeout=10).text
    finally:
        process.stop_server()
    return {OWNER[line.split()[2]] for line in text.splitlines() if line.startswith("# TYPE ragmon_")}


def settings_for(store_settings: StoreSettings, tmp_path: Path, **extra: Any) -> Settings:
    golden = tmp_path / "golden.json"
    write_golden(golden, [GoldenCase(id="g1", question="q", category="c", expected_behaviour="refuse",
                                     tags=["single-fact"])])
    return Settings(
        store=store_settings, server={"host": "127.0.0.1", "port": 0},
        drift={"judge_agreement": {"enabled": True}}, coverage={"golden_path": golden},
        review={"users": [{"username": "alice", "token_sha256": token_digest("t" * 32)}]},
        shadow={"comparisons": [{"baseline": "hybrid@v1", "candidate": "dense@v2", "window_seconds": 3600}]},
        otlp={"host": "127.0.0.1", "port": 0, "spool_dir": tmp_path / "spool",
              "dead_letters": str(tmp_path / "otlp-dead.jsonl")},
        **extra)


@pytest.mark.parametrize(("role", "owners"), [
    ("drift", {"drift"}),
    ("judge_agreement", {"judge_agreement"}),
    ("coverage", {"coverage"}),
    ("review", {"review"}),
    ("shadow", {"shadow"}),
    ("otlp", {"ingest", "otlp"}),  # the receiver's, and the trace loop's behind it
])
def test_a_process_exposes_the_metrics_of_the_roles_it_runs_and_no_others(store, store_settings, tmp_path, role,
                                                                          owners):
    assert store.guard is not None  # the embedded store: its disk and part metrics are the process's
    process = build_process(settings_for(store_settings, tmp_path), [role], store=store)
    try:
        assert exposed_owners(process) == ALWAYS | owners
    finally:
        if role == "otlp":
            process.service("otlp").shutdown()


@pytest.mark.kafka
def test_kafka_roles_expose_their_own_metrics_and_ingest_none_of_drift(store, store_settings, tmp_path, kafka_bootstrap,
                                                                        new_topic):
    topic = new_topic(1)
    settings = settings_for(store_settings, tmp_path, kafka={"bootstrap_servers": kafka_bootstrap, "topic": topic,
                                                       "dead_letter_topic": f"{topic}.dlq"},
                            ab={"outcomes_topic": f"{topic}.outcomes",
                                "outcomes_dead_letter_topic": f"{topic}.outcomes.dlq"})
    for roles, owners in ((["ingest"], {"ingest"}), (["score"], {"score", "judge"}), (["outcomes"], {"outcomes"}),
                          (["ingest", "otlp"], {"ingest", "otlp"})):  # the two trace loops share one set
        process = build_process(settings, roles, store=store)
        try:
            assert exposed_owners(process) == ALWAYS | owners, roles
        finally:
            for role in roles:
                if role in ("ingest", "otlp"):
                    process.service(role).shutdown()
                elif role == "score":
                    process.service("score").source.close()
                else:
                    process.parts["outcomes"].loops[0].close()


def test_a_process_with_several_roles_exposes_the_set_of_each(store, store_settings, tmp_path):
    process = build_process(settings_for(store_settings, tmp_path), ["drift", "judge_agreement", "review"], store=store)
    assert exposed_owners(process) == ALWAYS | {"drift", "judge_agreement", "review"}
    assert process.telemetry.owners == ["process", "store", "drift", "judge_agreement", "review"]  # in start order
