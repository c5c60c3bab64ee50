"""Data contracts: the trace (schemas/trace.v1) and the golden case (schemas/golden-case.v1)."""

from ragmon.contracts.decode import DecodedTrace, FastTrace, Rejection, decode_trace
from ragmon.contracts.golden import GoldenCase, GoldenSet
from ragmon.contracts.trace import Behaviour, Trace, Variant

__all__ = [
    "Behaviour",
    "DecodedTrace",
    "FastTrace",
    "GoldenCase",
    "GoldenSet",
    "Rejection",
    "Trace",
    "Variant",
    "decode_trace",
]
