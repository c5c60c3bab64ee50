"""calibrate --rejudge judges the labelled traces concurrently and pairs them exactly as one at a time does."""

from __future__ import annotations

import threading

from ragmon.judge import HeuristicJudge
from ragmon.judge.calibrate import pairs_from_items
from tests.conftest import make_trace


class BarrierJudge(HeuristicJudge):
    io_bound = True

    def __init__(self, width: int):
        super().__init__()
        self.barrier = threading.Barrier(width, timeout=30)

    def assess(self, item):
        self.barrier.wait()  # raises unless ``width`` calls run together
        return super().assess(item)


def test_rejudging_in_parallel_pairs_labels_as_sequential_judging_does():
    answers = ["Consent can be withdrawn at any time.", "Consent is permanent and cannot be withdrawn."]
    items = [(make_trace(answer=answers[i % 2], citations=[]), {"grounded": i % 3 != 0}, f"r{i % 2}")
             for i in range(16)]
    parallel = pairs_from_items(items, BarrierJudge(width=4), max_in_flight=4)
    sequential = pairs_from_items(items, HeuristicJudge())
    assert parallel == sequential and len(parallel) == 16
