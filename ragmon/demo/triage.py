"""The demo's negative-feedback triage (issue #21 part 2): the real ``select_triage`` queues the week's thumbs-down
production traces, and this module sets what was queued next to what the scenario injected.

No triage label is simulated: the cause (here, answers asserting what their passages do not say) is what a
reviewer finds at ``/review/triage/<week>``; the demo only says what it injected. Must not: write labels, or read
feedback anywhere the random review sample could see it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ragmon.demo.scenario import Scenario
from ragmon.review.queries import ReviewRows
from ragmon.review.records import parse_week
from ragmon.review.triage import TriageWeek, select_triage


@dataclass(frozen=True)
class TriageDemo:
    """The week's triage queue, and per stratum the thumbs-down the scenario put into that week's production
    traffic: ``burst`` (the incident's unsupported answers) and ``background``."""

    queue: TriageWeek
    burst: Mapping[str, int]
    background: Mapping[str, int]

    @property
    def queued(self) -> dict[str, int]:
        return dict(Counter(item.category for item in self.queue.items))

    def strata(self) -> list[str]:
        return sorted(set(self.burst) | set(self.background) | set(self.queued))


def run_triage(store: ReviewRows, scenario: Scenario, traces: Iterable[Mapping[str, Any]],
               now: datetime) -> TriageDemo:
    """Select the triage queue of the week the burst falls in, and count what was injected into that week."""
    week = scenario.triage_week(now)
    start, end = parse_week(week)
    injected: dict[str, Counter[str]] = {"burst": Counter(), "background": Counter()}
    for t in traces:
        kind = t.get("attributes", {}).get("demo_feedback", "")
        if (kind and t["retriever"]["variant"] == "production"
                and start <= datetime.fromisoformat(t["timestamp"]) < end):
            injected[kind][t["category"]] += 1
    queue = select_triage(store, week, seed=f"demo-{scenario.seed}", now=now, selected_by="demo")
    return TriageDemo(queue, dict(injected["burst"]), dict(injected["background"]))
