"""The garbage-collector tuning every long-running daemon applies before its roles start."""

from __future__ import annotations

import gc
import weakref

import msgspec

from ragmon.contracts.decode import decode_trace
from ragmon.daemon import GC_YOUNG_THRESHOLD, tune_gc
from tests.conftest import make_trace


def test_tune_gc_freezes_start_up_objects_and_raises_the_young_threshold():
    before = gc.get_threshold()
    gc.set_threshold(700, *before[1:])  # Python's default, whatever an earlier test in this process left
    try:
        tune_gc()
        assert gc.get_threshold()[0] == GC_YOUNG_THRESHOLD > 700
        assert gc.get_threshold()[1:] == before[1:]
        assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()
        gc.set_threshold(*before)


def test_cycles_made_after_tuning_are_still_collected():
    before = gc.get_threshold()
    try:
        tune_gc()

        class Node:
            pass

        a, b = Node(), Node()
        a.other, b.other = b, a
        ref = weakref.ref(a)
        del a, b
        assert ref() is not None  # reference counting alone cannot free a cycle
        gc.collect()
        assert ref() is None
    finally:
        gc.unfreeze()
        gc.set_threshold(*before)


def test_decoded_traces_are_not_tracked_by_the_collector():
    """The hot path's structs are declared gc=False: decoded JSON cannot form a reference cycle."""
    trace = decode_trace(msgspec.json.encode(make_trace())).trace
    assert not gc.is_tracked(trace)
    assert not gc.is_tracked(trace.retrieved[0])
