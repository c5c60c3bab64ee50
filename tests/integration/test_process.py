"""Which roles one process runs, and the real roles' health checks under the one naming rule (liveness
``<role>_loop``, readiness ``store`` and ``<role>``), built by ``ragmon.process`` on the real chDB store and the
real broker. The shutdown behaviour itself is tested once, with scripted roles: tests/unit/test_process.py."""

from __future__ import annotations

import pytest

from ragmon.config import Settings
from ragmon.errors import ConfigError
from ragmon.process import build_process
from ragmon.review.auth import token_digest

COMPARISON = {"comparisons": [{"baseline": "hybrid@v1", "candidate": "dense@v2", "window_seconds": 3600}]}
ONLY_DRIFT = {"ingest": False, "otlp": False, "score": False, "drift": True, "review": False}
REVIEWERS = {"users": [{"username": "alice", "token_sha256": token_digest("t" * 32)}]}


@pytest.mark.parametrize(("shadow_on", "expected"), [(True, ["drift", "judge_agreement", "shadow"]),
                                                     (False, ["drift", "judge_agreement"])])
def test_configured_comparisons_run_only_where_the_shadow_role_is_on(store, shadow_on, expected):
    settings = Settings(roles={**ONLY_DRIFT, "shadow": shadow_on}, shadow=COMPARISON)
    assert build_process(settings, store=store).role_names == expected


def test_shadow_alone_is_a_process_and_no_role_at_all_refuses_to_start(store):
    settings = Settings(roles={"ingest": False, "otlp": False, "score": False, "drift": False, "review": False,
                               "shadow": True},
                        shadow=COMPARISON)
    assert build_process(settings, store=store).role_names == ["shadow"]
    with pytest.raises(ConfigError, match="every role is switched off"):
        build_process(Settings(roles={**ONLY_DRIFT, "drift": False}), store=store)


def test_drift_review_and_shadow_register_their_checks_under_the_role_names(store):
    settings = Settings(roles={**ONLY_DRIFT, "review": True}, shadow=COMPARISON, review=REVIEWERS)
    process = build_process(settings, store=store)
    assert process.role_names == ["drift", "judge_agreement", "review", "shadow"]
    assert set(process.health.liveness) == {"drift_loop", "judge_agreement_loop", "review_loop", "shadow_loop"}
    assert set(process.health.readiness) == {"store"}
    ready, checks = process.health.evaluate(process.health.readiness)
    assert ready and checks["store"]["ok"] and checks["store"]["detail"].startswith("store answers"), checks
    ok, results = process.health.evaluate(process.health.liveness)
    assert ok and results["drift_loop"]["detail"] == "no check attempted yet"
    assert [loop.name for loop in process.daemon.roles] == ["drift", "judge-agreement", "review-gauges",
                                                            "review-select", "review-triage", "console-shadow-warm",
                                                            "shadow"]
    assert len(process.routers) == 3  # the review UI, and the console mounted with it (and its /console shortcut)


@pytest.mark.kafka
def test_ingest_and_score_liveness_limits_come_from_the_process_section(store, kafka_bootstrap, new_topic):
    topic = new_topic(1)
    settings = Settings(
        kafka={"bootstrap_servers": kafka_bootstrap, "topic": topic, "dead_letter_topic": f"{topic}.dlq"},
        process={"ingest_liveness_seconds": 90, "score_liveness_seconds": 300},
    )
    process = build_process(settings, ["ingest", "score"], store=store)
    try:
        assert set(process.health.liveness) == {"ingest_loop", "score_loop"}
        # score is ready while its writes succeed (a full disk makes it wait, not crash: the store's write guard)
        assert set(process.health.readiness) == {"store", "ingest", "score"}
        ok, live = process.health.evaluate(process.health.liveness)
        assert ok, live
        assert "limit 90s" in live["ingest_loop"]["detail"] and "limit 300s" in live["score_loop"]["detail"]
        ok, ready = process.health.evaluate(process.health.readiness)
        assert ok and ready["ingest"] == {"ok": True, "detail": "writes succeed"} and ready["score"]["ok"], ready
    finally:
        process.service("ingest").shutdown()
        process.service("score").source.close()
