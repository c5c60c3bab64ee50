"""The top hint of a paging drift alert (issue 32, item 1): the drift role, after a check that finds persistent drift
of a traces feature, publishes ``drift explain``'s first row as ``ragmon_drift_explain_top`` — the dimension and
segment of the incident — which RagmonRetrievalScoreDrift's ``hint`` annotation reads (alerts/tests/
explain_hint.test.yaml). Real chDB, the role as ``ragmon.process`` builds it."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import numpy as np
from prometheus_client import generate_latest

from ragmon.config import Settings
from ragmon.drift.role import build
from ragmon.drift.simulation.incidents import Incident, Traffic, insert
from ragmon.telemetry import Telemetry


def test_the_drift_role_publishes_the_top_cause_of_each_paging_group(store) -> None:
    now = datetime.now(UTC)
    traffic = Traffic(np.random.default_rng(8))
    for day in range(7, -1, -1):
        cols = traffic.window(400, now - timedelta(hours=1, days=day), 3600,
                              Incident("model_change", 0.6, 0.3) if day == 0 else None)
        insert(store, cols, retriever="hybrid@v1", variant="production", stratum="billing", run_id=f"d{day}")
    telemetry = Telemetry()
    parts = build(Settings(drift={"features": ["top1_score", "latency_ms"]}), store, telemetry)
    result = parts.service.run_due()
    assert result is not None and any(r.persistent and r.feature == "top1_score" for r in result.results)
    metrics = generate_latest(telemetry.registry).decode()
    hints = [line for line in metrics.splitlines() if line.startswith("ragmon_drift_explain_top{")]
    assert len(hints) == 1, hints
    labels = dict(re.findall(r'(\w+)="([^"]*)"', hints[0]))
    assert labels == {"retriever": "hybrid@v1", "variant": "production", "stratum": "billing", "feature": "top1_score",
                      "dimension": "model", "segment": "gpt-rag@2026-12"}
    assert float(hints[0].rsplit(" ", 1)[1]) > 0.6
