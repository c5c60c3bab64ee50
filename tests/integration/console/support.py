"""Helpers for the console tests: the console mounted as ``ragmon.process`` mounts it (next to the review UI, on
one app), hostile values for every field, and traces that carry them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import FastAPI

from ragmon.config import Settings
from ragmon.console.router import console_router, redirect_router
from ragmon.review.role import ReviewRole
from ragmon.server import Health, create_app
from ragmon.store import ClickHouseStore
from ragmon.telemetry import Telemetry
from tests.integration.review.support import review_settings

#: markup that would run if it were ever rendered as HTML, quotes that would break out of an attribute, a
#: right-to-left override, and non-Latin text
HOSTILE = ('<script>window.__pwned=1</script><img src=x onerror="window.__pwned=2">'
           "\"'><svg onload=window.__pwned=3> \u202e\u0645\u0631\u062d\u0628\u0627 \u65e5\u672c \U0001f600")
HUGE = "x" * 90_000


def console_settings(**sections: Any) -> Settings:
    return Settings(review=review_settings(), **sections)


def console_app(store: ClickHouseStore, settings: Settings | None = None,
                clock: Callable[[], float] | None = None) -> FastAPI:
    """The console and review UI on one app; ``clock`` (epoch seconds) is the console's time when given."""
    settings = settings or console_settings()
    telemetry = Telemetry()
    role = ReviewRole(settings.review, store, telemetry)
    console = (console_router(settings, store, role.context, clock=clock) if clock
               else console_router(settings, store, role.context))
    routers = [role.router, console, redirect_router()]
    return create_app(telemetry, Health(), routers=routers)


def hostile_trace(make_trace: Any, **overrides: Any) -> dict[str, Any]:
    """A valid trace with hostile text in every free-text field a page shows."""
    t = make_trace(**overrides)
    t["question"] = f"{HOSTILE} {HUGE}"
    t["answer"] = f"Consent can be withdrawn at any time. {HOSTILE}"
    t["citations"] = [{"sentence": 0, "chunk_id": "policy@c41", "quote": "Consent can be withdrawn at any time"},
                      {"sentence": 1, "chunk_id": HOSTILE, "quote": HOSTILE}]
    for c in t["retrieved"]:
        c["text"] = f"{c['text']} {HOSTILE}"
    t["retrieved"][2]["chunk_id"] = f"faq@{HOSTILE}"
    t["retrieved"][2]["doc_id"] = HOSTILE
    t["category"] = HOSTILE
    t["retriever"]["name"] = f"hybrid{HOSTILE}"
    t["retriever"]["version"] = HOSTILE
    t["model"] = {"name": HOSTILE, "version": HOSTILE}
    t["error"] = HOSTILE
    t["attributes"] = {HOSTILE: HOSTILE}
    t["latency_ms"] = {HOSTILE: 12.5, "total": 140.0}
    return t
